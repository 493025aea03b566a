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

/// Package installs and fetches: the commands that keep the operator's network under `network = "none"` unless the
/// operator lists others (`network_exceptions`).
pub const DEFAULT_NETWORK_EXCEPTIONS: &[&str] = &[
    "npm install",
    "npm i",
    "npm ci",
    "yarn install",
    "yarn add",
    "pnpm install",
    "pnpm add",
    "bun install",
    "bun add",
    "pip install",
    "pip3 install",
    "python* -m pip install",
    "uv pip install",
    "uv sync",
    "uv add",
    "poetry install",
    "cargo fetch",
    "go mod download",
    "bundle install",
    "gem install",
    "composer install",
];

/// The network the `network` setting gives commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// No network at all.
    None,
    /// Only the command's own loopback.
    Loopback,
    /// The host's network (within the operator's ceiling).
    Host,
}

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
    /// The network every command gets (`None`: the operator's, unchanged).
    pub network: Option<Network>,
    /// Commands that keep the operator's network when `network` narrows it.
    pub network_exceptions: PatternSet,
    /// How long a promoted command's start waits for readiness (`None`: the host's default).
    pub promoted_startup_wait_ms: Option<u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_timeout_ms: 10_000,
            max_timeout_ms: 3_600_000,
            on_timeout: OnTimeout::Background,
            ampersand_to_background: true,
            promote: PatternSet::from_builtin(DEFAULT_PROMOTE_PATTERNS, &DEFAULT_PROMOTE_ORDER),
            network: None,
            network_exceptions: PatternSet::new(Vec::new()),
            promoted_startup_wait_ms: None,
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
    profile: Option<String>,
    network: Option<String>,
    network_exceptions: Option<Vec<String>>,
    promoted_startup_wait: Option<Value>,
}

/// The setting names, for error messages.
pub const FIELDS: &str = "default_timeout, max_timeout, on_timeout, ampersand_to_background, promote_patterns, \
                          extra_promote_patterns, profile, network, network_exceptions, promoted_startup_wait";

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
        // `profile = "strict"`: no network, except package installs (unless `network` says otherwise).
        match raw.profile.as_deref() {
            None | Some("standard") => {}
            Some("strict") => s.network = Some(Network::None),
            Some(other) => {
                return Err(format!(
                    "setting `profile`: {other:?} is not a profile; use \"standard\" (commands get the operator's \
                     confinement) or \"strict\" (no network, except package installs)"
                ));
            }
        }
        if let Some(v) = raw.network.as_deref() {
            s.network = match v {
                "inherit" => None,
                "none" => Some(Network::None),
                "loopback" => Some(Network::Loopback),
                "host" => Some(Network::Host),
                other => {
                    return Err(format!(
                        "setting `network`: {other:?} is not accepted; use \"inherit\" (the operator's), \"none\", \
                         \"loopback\" or \"host\""
                    ));
                }
            };
        }
        if s.network.is_some() {
            s.network_exceptions = match &raw.network_exceptions {
                Some(list) => PatternSet::new(patterns_field("network_exceptions", list)?),
                None => PatternSet::new(
                    DEFAULT_NETWORK_EXCEPTIONS
                        .iter()
                        .map(|p| Pattern::parse_static(p).map_err(|e| e.to_string()))
                        .collect::<Result<_, _>>()?,
                ),
            };
        } else if raw.network_exceptions.is_some() {
            return Err(
                "setting `network_exceptions` has no effect without `network` (or `profile = \"strict\"`); set one \
                 of them or remove it"
                    .into(),
            );
        }
        if let Some(v) = &raw.promoted_startup_wait {
            s.promoted_startup_wait_ms = Some(duration_field("promoted_startup_wait", v)?);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strict_profile_takes_the_network_except_for_installs() {
        let s = Settings::from_json(r#"{"profile":"strict"}"#).unwrap();
        assert_eq!(s.network, Some(Network::None));
        assert_eq!(s.network_exceptions.len(), DEFAULT_NETWORK_EXCEPTIONS.len());
        let s = Settings::from_json(
            r#"{"profile":"strict","network":"loopback","network_exceptions":["make deps"]}"#,
        )
        .unwrap();
        assert_eq!(
            (s.network, s.network_exceptions.len()),
            (Some(Network::Loopback), 1)
        );
        for (bad, needle) in [
            (r#"{"profile":"paranoid"}"#, "strict"),
            (r#"{"network":"wide"}"#, "loopback"),
            (r#"{"network_exceptions":["npm install"]}"#, "no effect"),
            (
                r#"{"promoted_startup_wait":"soon"}"#,
                "promoted_startup_wait",
            ),
        ] {
            let e = Settings::from_json(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        assert_eq!(
            Settings::from_json(r#"{"promoted_startup_wait":"20s"}"#)
                .unwrap()
                .promoted_startup_wait_ms,
            Some(20_000)
        );
    }

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
