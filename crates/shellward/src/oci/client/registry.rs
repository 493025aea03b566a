//! The registry side of a pull, bounded: anonymous token auth, the manifest read into at most
//! [`PullLimits::max_manifest_bytes`], the component streamed through SHA-256 into a temporary file and cut off at
//! the size its manifest declares (and at [`PullLimits::max_component_bytes`]), connect and read timeouts on every
//! request, a minimum rate over every answer's body ([`Pace`]) and one deadline over the whole pull.
//!
//! Written here rather than through `oci-client` (still used for references and pushes): its pull reads a manifest
//! whole into memory whatever its size, hands a blob to the writer without comparing its length with the declared
//! size, and has no overall deadline — a hostile registry made a pull take 9.4 GiB of memory or hang for good.

use super::{OciError, PullLimits, fail};
use oci_client::Reference;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, WWW_AUTHENTICATE};
use reqwest::{Client, StatusCode, Url};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::time::Instant;

/// Media types a manifest is asked for in (an OCI image manifest, or Docker's schema 2 of the same shape).
const MANIFEST_TYPES: &str = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
/// Most bytes of a token endpoint's answer.
const MAX_TOKEN_BYTES: u64 = 64 << 10;

/// One registry's repository, spoken to with the limits of one pull.
pub(super) struct Registry<'a> {
    http: Client,
    base: Url,
    repository: String,
    /// The reference as the user wrote it, for messages.
    name: &'a str,
    limits: &'a PullLimits,
    token: Option<String>,
}

impl<'a> Registry<'a> {
    /// A client for `reference`'s repository: plain HTTP for a loopback registry, HTTPS for every other (and no
    /// redirect from HTTPS down to HTTP).
    pub(super) fn new(
        reference: &Reference,
        name: &'a str,
        limits: &'a PullLimits,
    ) -> Result<Registry<'a>, OciError> {
        let registry = reference.resolve_registry();
        let scheme = if super::is_loopback(registry) {
            "http"
        } else {
            "https"
        };
        let base = Url::parse(&format!("{scheme}://{registry}/v2/")).map_err(|e| {
            fail(
                name,
                format!("the registry {registry:?} is not a host name: {e}"),
            )
        })?;
        super::super::install_tls_provider();
        let http = Client::builder()
            .connect_timeout(limits.connect_timeout)
            .read_timeout(limits.read_timeout)
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let downgrade = attempt.url().scheme() == "http"
                    && attempt.previous().iter().any(|u| u.scheme() == "https");
                if downgrade {
                    attempt.error("the registry redirected from HTTPS to plain HTTP")
                } else if attempt.previous().len() >= 5 {
                    attempt.error("more than 5 redirects")
                } else {
                    attempt.follow()
                }
            }))
            .build()
            .map_err(|e| fail(name, format!("cannot start the registry client: {e}")))?;
        Ok(Registry {
            http,
            base,
            repository: reference.repository().to_string(),
            name,
            limits,
            token: None,
        })
    }

    fn url(&self, kind: &str, target: &str) -> Result<Url, OciError> {
        self.base
            .join(&format!("{}/{kind}/{target}", self.repository))
            .map_err(|e| fail(self.name, format!("cannot make the {kind} URL: {e}")))
    }

    /// `GET url`, answering one bearer challenge anonymously (a token from the realm the registry names).
    async fn get(&mut self, url: Url, accept: Option<&str>) -> Result<reqwest::Response, OciError> {
        for attempt in 0..2 {
            let mut request = self.http.get(url.clone());
            if let Some(accept) = accept {
                request = request.header(ACCEPT, accept);
            }
            if let Some(token) = &self.token {
                request = request.header(AUTHORIZATION, format!("Bearer {token}"));
            }
            let response = request.send().await.map_err(|e| {
                fail(
                    self.name,
                    format!("cannot reach the registry: {}", chain(&e)),
                )
            })?;
            if response.status() != StatusCode::UNAUTHORIZED || attempt == 1 {
                return Ok(response);
            }
            let challenge = response
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            self.token = Some(self.anonymous_token(&challenge).await?);
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// A pull token from the realm of a `Bearer realm="…",service="…",scope="…"` challenge.
    async fn anonymous_token(&self, challenge: &str) -> Result<String, OciError> {
        let Some(params) = bearer_params(challenge) else {
            return Err(fail(
                self.name,
                format!(
                    "the registry asks for credentials ({}); shellward pulls anonymously: make the repository public \
                     or mirror the policy to one that is",
                    if challenge.is_empty() {
                        "no challenge"
                    } else {
                        challenge
                    }
                ),
            ));
        };
        let get = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.as_str())
        };
        let realm = get("realm")
            .ok_or_else(|| fail(self.name, "the registry's token challenge names no realm"))?;
        let mut url = Url::parse(realm).map_err(|e| {
            fail(
                self.name,
                format!("the registry's token realm {realm:?} is not a URL: {e}"),
            )
        })?;
        if url.scheme() != "https"
            && !(url.scheme() == "http" && url.host_str().is_some_and(super::is_loopback))
        {
            return Err(fail(
                self.name,
                format!(
                    "the registry's token realm {realm} is not HTTPS; refusing to fetch a token over it"
                ),
            ));
        }
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = get("service") {
                query.append_pair("service", service);
            }
            let scope = get("scope")
                .map(str::to_string)
                .unwrap_or_else(|| format!("repository:{}:pull", self.repository));
            query.append_pair("scope", &scope);
        }
        let response = self.http.get(url).send().await.map_err(|e| {
            fail(
                self.name,
                format!("cannot fetch a pull token: {}", chain(&e)),
            )
        })?;
        if !response.status().is_success() {
            return Err(fail(
                self.name,
                format!(
                    "the token endpoint answered {}; the repository may need credentials",
                    response.status()
                ),
            ));
        }
        let body = read_capped(
            self.name,
            response,
            MAX_TOKEN_BYTES,
            "token answer",
            "",
            self.limits,
        )
        .await?;
        #[derive(serde::Deserialize)]
        struct TokenAnswer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let answer: TokenAnswer = serde_json::from_slice(&body).map_err(|e| {
            fail(
                self.name,
                format!("the token endpoint's answer is not JSON: {e}"),
            )
        })?;
        answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty() && !t.contains(['\r', '\n']))
            .ok_or_else(|| fail(self.name, "the token endpoint's answer holds no token"))
    }

    /// The raw manifest `target` (a tag or digest) names, at most [`PullLimits::max_manifest_bytes`].
    pub(super) async fn manifest(&mut self, target: &str) -> Result<Vec<u8>, OciError> {
        let url = self.url("manifests", target)?;
        let response = self.get(url, Some(MANIFEST_TYPES)).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(fail(
                self.name,
                format!("cannot fetch the manifest: the registry answered {status}"),
            ));
        }
        read_capped(
            self.name,
            response,
            self.limits.max_manifest_bytes,
            "manifest",
            "raise [oci] max_manifest_bytes if the manifest is genuine",
            self.limits,
        )
        .await
    }

    /// Streams blob `digest` (declared `size` bytes) into `out`, hashing as it goes; refused as soon as more than
    /// `size` bytes arrive, and when fewer did or the digest differs.
    pub(super) async fn blob(
        &mut self,
        digest: &str,
        size: u64,
        out: &mut impl Write,
    ) -> Result<(), OciError> {
        if size > self.limits.max_component_bytes {
            return Err(fail(
                self.name,
                format!(
                    "the manifest declares a {size}-byte component, over the {}-byte limit; raise [oci] \
                     max_component_bytes if it is genuine",
                    self.limits.max_component_bytes
                ),
            ));
        }
        let want = digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(want) = want else {
            return Err(fail(
                self.name,
                format!(
                    "the component's digest {digest:?} is not a sha256 digest; only sha256 is verified"
                ),
            ));
        };
        let url = self.url("blobs", digest)?;
        let mut response = self.get(url, None).await?;
        let status = response.status();
        if !status.is_success() {
            return Err(fail(
                self.name,
                format!("cannot fetch the component: the registry answered {status}"),
            ));
        }
        if let Some(declared) = content_length(&response)
            && declared != size
        {
            return Err(fail(
                self.name,
                format!(
                    "the registry sends {declared} bytes for a component its manifest declares as {size}; refusing it"
                ),
            ));
        }
        let mut hasher = Sha256::new();
        let mut received = 0u64;
        let mut pace = Pace::new(self.limits);
        while let Some(chunk) = response.chunk().await.map_err(|e| {
            fail(
                self.name,
                format!("the component's download failed: {}", chain(&e)),
            )
        })? {
            received += chunk.len() as u64;
            pace.check(self.name, &self.base, "component", received)?;
            if received > size {
                return Err(fail(
                    self.name,
                    format!(
                        "the registry sent more than the {size} bytes the manifest declares; refusing it"
                    ),
                ));
            }
            hasher.update(&chunk);
            out.write_all(&chunk).map_err(|e| {
                fail(
                    self.name,
                    format!("cannot write the component to the cache: {e}"),
                )
            })?;
        }
        if received != size {
            return Err(fail(
                self.name,
                format!(
                    "the registry sent {received} bytes of a component its manifest declares as {size}; refusing it"
                ),
            ));
        }
        let got = super::hex(&hasher.finalize());
        if !got.eq_ignore_ascii_case(want) {
            return Err(fail(
                self.name,
                format!(
                    "the component's digest is sha256:{got}, not {digest} as its manifest says; refusing it"
                ),
            ));
        }
        Ok(())
    }
}

/// The minimum rate of one answer's body: every [`PullLimits::rate_window`] at least `min_rate × window` more bytes
/// must have arrived. Checked as bytes arrive: a body that stops altogether is the read timeout's, one that drips
/// is cut off here within a window and a read timeout, long before the whole pull's deadline.
struct Pace {
    window: std::time::Duration,
    /// Bytes a window must bring; 0 when the check is off.
    per_window: u64,
    started: Instant,
    at_start: u64,
}

impl Pace {
    fn new(limits: &PullLimits) -> Pace {
        Pace {
            window: limits.rate_window,
            per_window: (limits.min_rate as f64 * limits.rate_window.as_secs_f64()) as u64,
            started: Instant::now(),
            at_start: 0,
        }
    }

    /// Called with the bytes received so far; an error once a whole window brought too few.
    fn check(&mut self, name: &str, from: &Url, what: &str, received: u64) -> Result<(), OciError> {
        if self.per_window == 0 || self.started.elapsed() < self.window {
            return Ok(());
        }
        let brought = received - self.at_start;
        if brought < self.per_window {
            let host = from.host_str().unwrap_or("?");
            let port = from.port().map(|p| format!(":{p}")).unwrap_or_default();
            return Err(fail(
                name,
                format!(
                    "the registry {host}{port} sent {brought} bytes of the {what} in {:.0}s, under the minimum rate of \
                     {} bytes/s; refusing it (lower [oci] min_rate if the registry is genuinely this slow)",
                    self.started.elapsed().as_secs_f64(),
                    self.per_window as f64 / self.window.as_secs_f64(),
                ),
            ));
        }
        self.started = Instant::now();
        self.at_start = received;
        Ok(())
    }
}

/// The `Content-Length` a response declares, if any.
fn content_length(response: &reqwest::Response) -> Option<u64> {
    response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// A response's body, refused as soon as it is declared or found to be longer than `cap`.
async fn read_capped(
    name: &str,
    mut response: reqwest::Response,
    cap: u64,
    what: &str,
    fix: &str,
    limits: &PullLimits,
) -> Result<Vec<u8>, OciError> {
    let from = response.url().clone();
    let mut pace = Pace::new(limits);
    let too_long = || {
        let mut message =
            format!("the registry's {what} is longer than the {cap}-byte limit; refusing it");
        if !fix.is_empty() {
            message.push_str(&format!(" ({fix})"));
        }
        fail(name, message)
    };
    if content_length(&response).is_some_and(|n| n > cap) {
        return Err(too_long());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| fail(name, format!("reading the {what} failed: {}", chain(&e))))?
    {
        if body.len() as u64 + chunk.len() as u64 > cap {
            return Err(too_long());
        }
        body.extend_from_slice(&chunk);
        pace.check(name, &from, what, body.len() as u64)?;
    }
    Ok(body)
}

/// An error with its sources, which name the timeout or refused connection behind a request error.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

/// The parameters of a `Bearer` challenge (`Bearer realm="…",service="…"`), or `None` for another scheme.
///
/// Hand-written: the grammar needed is a comma-separated list of `key="value"` (or bare token) pairs, and no
/// maintained crate parses just a challenge.
fn bearer_params(challenge: &str) -> Option<Vec<(String, String)>> {
    let rest = challenge.trim_start();
    let (scheme, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && *c != ',')).collect();
        if key.trim().is_empty() {
            break;
        }
        if chars.next() != Some('=') {
            break;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => value.extend(chars.next()),
                    c => value.push(c),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| *c != ','))
                .collect::<String>()
                .trim()
                .to_string();
        }
        params.push((key.trim().to_string(), value));
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::bearer_params;

    #[test]
    fn bearer_challenges_are_read_with_quotes_commas_and_escapes() {
        let p = bearer_params(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
        assert_eq!(
            p,
            [
                (
                    "realm".to_string(),
                    "https://auth.example/token".to_string()
                ),
                ("service".to_string(), "registry.example".to_string()),
                ("scope".to_string(), "repository:a/b:pull,push".to_string()),
            ]
        );
        assert_eq!(
            bearer_params(r#"bearer realm="a\"b", error=invalid_token"#).unwrap(),
            [
                ("realm".to_string(), "a\"b".to_string()),
                ("error".to_string(), "invalid_token".to_string())
            ]
        );
        assert_eq!(bearer_params(r#"Basic realm="x""#), None);
        assert_eq!(bearer_params("Bearer").unwrap(), []);
    }
}
