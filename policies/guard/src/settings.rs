//! The guard's settings: JSON validated in `configure`, errors naming the field.

use crate::rules::{Guard, RULES};
use shellward_kit::pattern::Pattern;

/// Parses settings JSON (`{}` or empty for the defaults):
/// `{"deny": [PATTERN…], "allow": [PATTERN…], "disable": [RULE…]}`.
pub fn parse(text: &str) -> Result<Guard, String> {
    if text.trim().is_empty() {
        return Ok(Guard::default());
    }
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("settings are not valid JSON: {e}"))?;
    let Some(object) = value.as_object() else {
        return Err(
            "settings must be a JSON object such as {\"deny\": [\"git push --force\"]}".into(),
        );
    };
    let mut guard = Guard::default();
    for (key, v) in object {
        let list = || -> Result<Vec<String>, String> {
            let items = v
                .as_array()
                .ok_or_else(|| format!("setting `{key}` must be an array of strings"))?;
            items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("setting `{key}` must be an array of strings"))
                })
                .collect()
        };
        let patterns = |items: Vec<String>| -> Result<Vec<Pattern>, String> {
            items
                .iter()
                .map(|p| Pattern::parse(p).map_err(|e| format!("setting `{key}`: {e}")))
                .collect()
        };
        match key.as_str() {
            "deny" => guard.deny = patterns(list()?)?,
            "allow" => guard.allow = patterns(list()?)?,
            "disable" => {
                for rule in list()? {
                    if !RULES.contains(&rule.as_str()) {
                        return Err(format!(
                            "setting `disable`: unknown rule {rule:?}; the rules are {}",
                            RULES.join(", ")
                        ));
                    }
                    guard.disabled.push(rule);
                }
            }
            other => {
                return Err(format!(
                    "unknown setting `{other}`; the settings are deny, allow and disable"
                ));
            }
        }
    }
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field() {
        for (text, needle) in [
            ("[1]", "JSON object"),
            ("{\"deny\": \"x\"}", "`deny`"),
            ("{\"allow\": [\"!x\"]}", "`allow`"),
            ("{\"disable\": [\"nope\"]}", "rm-root"),
            ("{\"colour\": 1}", "`colour`"),
            ("{", "JSON"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
        assert!(parse("").is_ok());
        assert!(parse("{}").is_ok());
    }
}
