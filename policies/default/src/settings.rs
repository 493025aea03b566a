//! The default policy's operator settings: parsed from JSON and validated once, in `configure`.

use serde::Deserialize;
use serde_json::Value;
use shellward_kit::duration;
use shellward_kit::pattern::{BuiltinIndex, Pattern, PatternSet, program_order};

/// Built-in promotion patterns: commands that normally run until they are stopped (dev servers, file watchers,
/// log followers). See `shellward_kit::pattern` for the syntax.
pub const DEFAULT_PROMOTE_PATTERNS: &[&str] = &[
    // JavaScript package scripts and dev servers.
    "npm run dev",
    "npm run start",
    "npm run serve",
    "npm run watch",
    "npm run preview",
    "npm run storybook",
    "npm start",
    "yarn dev",
    "yarn start",
    "yarn serve",
    "yarn watch",
    "yarn run dev",
    "yarn run start",
    "pnpm dev",
    "pnpm start",
    "pnpm serve",
    "pnpm run dev",
    "pnpm run start",
    "bun dev",
    "bun start",
    "bun run dev",
    "bun run start",
    "vite !build !optimize",
    "npx vite !build",
    "next dev",
    "next start",
    "npx next dev",
    "npx next start",
    "nuxt dev",
    "nuxi dev",
    "ng serve",
    "webpack serve",
    "webpack-dev-server",
    "webpack --watch",
    "webpack -w",
    "tsc --watch",
    "tsc -w",
    "nodemon",
    "npx nodemon",
    "http-server",
    "npx http-server",
    "live-server",
    "npx serve",
    "storybook dev",
    // Python servers.
    "python* -m http.server",
    "python* manage.py runserver",
    "python* -m flask run",
    "python* -m uvicorn",
    "flask run",
    "uvicorn",
    "gunicorn",
    "hypercorn",
    "streamlit run",
    "jupyter notebook",
    "jupyter lab",
    "mkdocs serve",
    // Ruby, PHP, static sites.
    "rails server",
    "rails s",
    "bundle exec rails server",
    "bundle exec rails s",
    "bundle exec jekyll serve",
    "jekyll serve",
    "hugo server",
    "hugo serve",
    "php -S",
    "php artisan serve",
    // Watchers and followers.
    "cargo watch",
    "watchexec",
    "watch",
    "tail -*f*",
    "tail -*F*",
    "journalctl -f",
    "journalctl --follow",
    "kubectl logs -f",
    "kubectl logs --follow",
    "kubectl port-forward",
    "docker logs -f",
    "docker logs --follow",
    "docker compose logs -f",
    "docker compose up !-d !--detach",
    "docker-compose up !-d !--detach",
    "ping !-c !-w",
    "sleep infinity",
];

/// The index of [`DEFAULT_PROMOTE_PATTERNS`], computed at compile time: `configure` neither parses nor sorts the
/// built-in list (a fresh instance per evaluation runs `configure` every time).
const DEFAULT_PROMOTE_ORDER: BuiltinIndex = program_order(DEFAULT_PROMOTE_PATTERNS);

/// What to do with a foreground command whose timeout expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnTimeout {
    /// Terminate its process tree.
    Kill,
    /// Keep it running as a background process.
    Background,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Foreground timeout when the caller gives none (ms).
    pub default_timeout_ms: u64,
    /// Longest foreground timeout allowed (ms); longer requests are clamped.
    pub max_timeout_ms: u64,
    /// What happens when the foreground timeout expires, unless a previous policy decided.
    pub on_timeout: OnTimeout,
    /// Whether a trailing `&` (and mid-command `&`) turns into a tracked background run.
    pub ampersand_to_background: bool,
    /// Commands promoted to background.
    pub promote: PatternSet,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_timeout_ms: 10_000,
            max_timeout_ms: 3_600_000,
            on_timeout: OnTimeout::Background,
            ampersand_to_background: true,
            promote: PatternSet::from_builtin(DEFAULT_PROMOTE_PATTERNS, &DEFAULT_PROMOTE_ORDER),
        }
    }
}

/// The settings as written by the operator (all optional).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    default_timeout: Option<Value>,
    max_timeout: Option<Value>,
    on_timeout: Option<String>,
    ampersand_to_background: Option<bool>,
    promote_patterns: Option<Vec<String>>,
    extra_promote_patterns: Option<Vec<String>>,
}

/// The setting names, for error messages.
pub const FIELDS: &str = "default_timeout, max_timeout, on_timeout, ampersand_to_background, promote_patterns, extra_promote_patterns";

fn duration_field(name: &str, value: &Value) -> Result<u64, String> {
    let ms = match value {
        Value::String(s) => {
            duration::parse_millis(s).map_err(|e| format!("setting `{name}`: {e}"))?
        }
        Value::Number(n) => n.as_u64().ok_or_else(|| {
            format!("setting `{name}`: {n} is not a whole number of milliseconds; use e.g. \"30s\"")
        })?,
        other => {
            return Err(format!(
                "setting `{name}`: expected a duration string such as \"30s\" or a number of milliseconds, got {other}"
            ));
        }
    };
    if ms == 0 {
        return Err(format!("setting `{name}`: must be greater than zero"));
    }
    Ok(ms)
}

fn patterns_field(name: &str, list: &[String]) -> Result<Vec<Pattern>, String> {
    list.iter()
        .map(|p| Pattern::parse(p).map_err(|e| format!("setting `{name}`: {e}")))
        .collect()
}

impl Settings {
    /// Parses and validates settings JSON. Empty text means defaults. Errors name the field and what is accepted.
    pub fn from_json(text: &str) -> Result<Settings, String> {
        let mut s = Settings::default();
        if text.trim().is_empty() {
            return Ok(s);
        }
        let raw: RawSettings = serde_json::from_str(text).map_err(|e| {
            format!("invalid settings for the default policy: {e}; expected a JSON object with any of: {FIELDS}")
        })?;
        if let Some(v) = &raw.default_timeout {
            s.default_timeout_ms = duration_field("default_timeout", v)?;
        }
        if let Some(v) = &raw.max_timeout {
            s.max_timeout_ms = duration_field("max_timeout", v)?;
        }
        if s.default_timeout_ms > s.max_timeout_ms {
            return Err(format!(
                "setting `default_timeout` ({}) is longer than `max_timeout` ({}); lower it or raise max_timeout",
                duration::format_millis(s.default_timeout_ms),
                duration::format_millis(s.max_timeout_ms)
            ));
        }
        if let Some(v) = raw.on_timeout.as_deref() {
            s.on_timeout = match v {
                "kill" => OnTimeout::Kill,
                "background" => OnTimeout::Background,
                other => {
                    return Err(format!(
                        "setting `on_timeout`: {other:?} is not accepted; use \"kill\" or \"background\""
                    ));
                }
            };
        }
        if let Some(v) = raw.ampersand_to_background {
            s.ampersand_to_background = v;
        }
        if let Some(list) = &raw.promote_patterns {
            s.promote = PatternSet::new(patterns_field("promote_patterns", list)?);
        }
        if let Some(list) = &raw.extra_promote_patterns {
            for p in patterns_field("extra_promote_patterns", list)? {
                s.promote.push(p);
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let s = Settings::from_json("{}").unwrap();
        assert_eq!(s.default_timeout_ms, 10_000);
        assert_eq!(s.max_timeout_ms, 3_600_000);
        assert_eq!(s.on_timeout, OnTimeout::Background);
        assert_eq!(s.promote.len(), DEFAULT_PROMOTE_PATTERNS.len());
        assert_eq!(Settings::from_json("").unwrap().default_timeout_ms, 10_000);
    }

    /// The built-in list is valid, in normal form, and its compile-time index finds what a parsed set finds.
    #[test]
    fn the_built_in_patterns_are_valid_and_indexed_like_parsed_ones() {
        let parsed: Vec<Pattern> = DEFAULT_PROMOTE_PATTERNS
            .iter()
            .map(|p| Pattern::parse_static(p).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        for (p, text) in parsed.iter().zip(DEFAULT_PROMOTE_PATTERNS) {
            assert_eq!(
                p.as_str(),
                *text,
                "built-in patterns are written in normal form"
            );
        }
        let eager = PatternSet::new(parsed);
        let lazy = Settings::default().promote;
        let commands = DEFAULT_PROMOTE_PATTERNS
            .iter()
            .map(|p| p.replace('!', "").replace('*', "x"))
            .chain(
                [
                    "npm test",
                    "python3 -m http.server 8000",
                    "./vite",
                    "tail -n 5 -f x",
                ]
                .map(String::from),
            );
        for c in commands {
            let w: Vec<&str> = c.split(' ').collect();
            assert_eq!(
                eager.find(&w).map(|p| p.as_str()),
                lazy.find(&w).map(|p| p.as_str()),
                "{c}"
            );
        }
    }

    #[test]
    fn every_field_is_read() {
        let s = Settings::from_json(
            r#"{"default_timeout":"30s","max_timeout":120000,"on_timeout":"kill","ampersand_to_background":false,
                "promote_patterns":["make serve"],"extra_promote_patterns":["./run-forever"]}"#,
        )
        .unwrap();
        assert_eq!(s.default_timeout_ms, 30_000);
        assert_eq!(s.max_timeout_ms, 120_000);
        assert_eq!(s.on_timeout, OnTimeout::Kill);
        assert!(!s.ampersand_to_background);
        let p: Vec<&str> = s.promote.patterns().iter().map(|p| p.as_str()).collect();
        assert_eq!(p, ["make serve", "./run-forever"]);
    }

    #[test]
    fn errors_name_the_field() {
        for (json, field) in [
            (r#"{"default_timeout":"soon"}"#, "default_timeout"),
            (r#"{"default_timeout":0}"#, "default_timeout"),
            (r#"{"max_timeout":-5}"#, "max_timeout"),
            (r#"{"max_timeout":true}"#, "max_timeout"),
            (r#"{"default_timeout":"2h"}"#, "default_timeout"),
            (r#"{"on_timeout":"explode"}"#, "on_timeout"),
            (r#"{"promote_patterns":["!x"]}"#, "promote_patterns"),
            (
                r#"{"extra_promote_patterns":[""]}"#,
                "extra_promote_patterns",
            ),
            (r#"{"timeout":"5s"}"#, "timeout"),
            (r#"[1,2]"#, "default_timeout"),
            (r#"{"#, "default_timeout"),
        ] {
            let e = Settings::from_json(json).expect_err(json);
            assert!(e.contains(field), "{json}: {e}");
        }
    }
}
