//! Idempotent starts: a client token names one start, so a caller whose answer was lost (a network hiccup, a timed
//! out request, a restarted client) can send the same start again without starting a second process.
//!
//! A [`TokenIndex`] maps a token, within its scope (a session, and for Coder's process API a chat), to the fingerprint
//! of the request that first used it and to that start's outcome once it is known. A later start with the token:
//! - with the same fingerprint gets the first start's outcome (waiting for it while the first start is still in
//!   flight) and starts nothing;
//! - with a different fingerprint is refused ([`Claim::Mismatch`]): the token was already used for something else.
//!
//! A first start that fails before it has an outcome to share (its [`FirstStart`] is dropped unpublished: the start
//! errored, or its task was cancelled) releases the token, so the retry starts it. Outcomes are kept until the
//! caller's `expired` test says the thing they name is gone (the executor's retention of the process), and the index
//! holds at most `max_entries` outcomes (the oldest finished ones go first).

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The longest a client token may be, in bytes.
pub const MAX_TOKEN_BYTES: usize = 256;

/// How often, at most, [`TokenIndex::claim`] sweeps expired outcomes.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Where a token is unique: the session (`None` is the default session) and an optional narrower scope within it
/// (Coder's chat).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenScope {
    /// The session.
    pub session: Option<String>,
    /// A narrower scope within the session, e.g. a chat id.
    pub within: Option<String>,
}

/// A digest of the request a token was first used with: two starts are "the same" when their fingerprints are equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of `parts`, each length-prefixed so that no two different lists digest alike.
    pub fn of<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Fingerprint {
        let mut hash = Sha256::new();
        for part in parts {
            hash.update((part.len() as u64).to_le_bytes());
            hash.update(part);
        }
        Fingerprint(hash.finalize().into())
    }
}

/// What a token's entry holds.
struct Entry<T> {
    fingerprint: Fingerprint,
    /// When the token was first used.
    claimed: Instant,
    /// When the outcome was published.
    published: Option<Instant>,
    /// `None` while the first start is in flight, then its outcome.
    outcome: watch::Receiver<Option<T>>,
    /// Tells a released entry from a newer one under the same key.
    generation: u64,
}

struct State<T> {
    entries: HashMap<(TokenScope, String), Entry<T>>,
    last_sweep: Instant,
    next_generation: u64,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    created: Instant,
    max_entries: usize,
}

/// Client tokens and the starts they name; cheap to clone (shared). See the [module docs](self).
pub struct TokenIndex<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for TokenIndex<T> {
    fn clone(&self) -> Self {
        TokenIndex {
            shared: self.shared.clone(),
        }
    }
}

/// The answer to [`TokenIndex::claim`].
pub enum Claim<T> {
    /// The token is new: start, then [`FirstStart::publish`] the outcome.
    First(FirstStart<T>),
    /// The token already named a start with the same request: wait for its outcome ([`Retry::outcome`]).
    Retry(Retry<T>),
    /// The token already named a start with a different request: refuse, and start nothing.
    Mismatch,
}

/// The first start under a token. Publish its outcome; dropping it unpublished releases the token.
pub struct FirstStart<T> {
    index: TokenIndex<T>,
    key: (TokenScope, String),
    generation: u64,
    sender: Option<watch::Sender<Option<T>>>,
}

/// A retried start: the first start's outcome, now or once it is published.
pub struct Retry<T> {
    outcome: watch::Receiver<Option<T>>,
}

/// Why a [`Retry`] has no outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryError {
    /// The first start is still in flight after the wait.
    Pending,
    /// The first start ended without an outcome and released the token: claim it again.
    Released,
}

/// What [`TokenIndex::lookup`] knows of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenState<T> {
    /// No start under this token (never, or its outcome expired).
    Unknown,
    /// A start under this token is in flight.
    Pending,
    /// The start under this token has this outcome.
    Done(T),
}

impl<T: Clone> TokenIndex<T> {
    /// An empty index that keeps at most `max_entries` outcomes.
    pub fn new(max_entries: usize) -> TokenIndex<T> {
        let now = Instant::now();
        TokenIndex {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    entries: HashMap::new(),
                    last_sweep: now,
                    next_generation: 0,
                }),
                created: now,
                max_entries: max_entries.max(1),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long this index has existed: a token sent before that was sent to an earlier instance (a restart), which
    /// is why it may be unknown here.
    pub fn age(&self) -> Duration {
        self.shared.created.elapsed()
    }

    /// Claims `token` in `scope` for a start whose request has `fingerprint`. Outcomes for which `expired(scope,
    /// outcome, published_for)` holds are dropped first (at most once a second).
    pub fn claim(
        &self,
        scope: TokenScope,
        token: &str,
        fingerprint: Fingerprint,
        expired: impl Fn(&TokenScope, &T, Duration) -> bool,
    ) -> Claim<T> {
        let mut state = self.state();
        let now = Instant::now();
        if now.duration_since(state.last_sweep) >= SWEEP_EVERY {
            state.last_sweep = now;
            sweep(&mut state, now, &expired);
        }
        let key = (scope, token.to_string());
        if let Some(entry) = state.entries.get(&key) {
            return if entry.fingerprint == fingerprint {
                Claim::Retry(Retry {
                    outcome: entry.outcome.clone(),
                })
            } else {
                Claim::Mismatch
            };
        }
        if state.entries.len() >= self.shared.max_entries {
            // Full: the oldest finished outcomes go (a start in flight is never dropped; those are bounded by the
            // executor's running limits).
            sweep(&mut state, now, &expired);
            let over = (state.entries.len() + 1).saturating_sub(self.shared.max_entries);
            if over > 0 {
                let mut finished: Vec<_> = state
                    .entries
                    .iter()
                    .filter_map(|(k, e)| e.published.map(|at| (at, k.clone())))
                    .collect();
                finished.sort_by_key(|(at, _)| *at);
                for (_, k) in finished.into_iter().take(over) {
                    state.entries.remove(&k);
                }
            }
        }
        let (sender, receiver) = watch::channel(None);
        let generation = state.next_generation;
        state.next_generation += 1;
        state.entries.insert(
            key.clone(),
            Entry {
                fingerprint,
                claimed: now,
                published: None,
                outcome: receiver,
                generation,
            },
        );
        Claim::First(FirstStart {
            index: self.clone(),
            key,
            generation,
            sender: Some(sender),
        })
    }

    /// What is known of `token` in `scope`, and how long ago it was first used.
    pub fn lookup(&self, scope: TokenScope, token: &str) -> (TokenState<T>, Option<Duration>) {
        let state = self.state();
        match state.entries.get(&(scope, token.to_string())) {
            None => (TokenState::Unknown, None),
            Some(entry) => {
                let age = Some(entry.claimed.elapsed());
                match entry.outcome.borrow().clone() {
                    Some(outcome) => (TokenState::Done(outcome), age),
                    None => (TokenState::Pending, age),
                }
            }
        }
    }

    /// How many tokens the index holds.
    pub fn len(&self) -> usize {
        self.state().entries.len()
    }

    /// Whether the index holds no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Drops the outcomes `expired` says are gone.
fn sweep<T>(
    state: &mut State<T>,
    now: Instant,
    expired: &impl Fn(&TokenScope, &T, Duration) -> bool,
) {
    state.entries.retain(|(scope, _), e| match e.published {
        None => true,
        Some(at) => match e.outcome.borrow().as_ref() {
            Some(outcome) => !expired(scope, outcome, now.duration_since(at)),
            None => true,
        },
    });
}

impl<T: Clone> FirstStart<T> {
    /// Records the start's outcome: retries waiting now, and those to come, get it.
    pub fn publish(mut self, outcome: T) {
        let Some(sender) = self.sender.take() else {
            return;
        };
        {
            let mut state = self.index.state();
            if let Some(entry) = state.entries.get_mut(&self.key)
                && entry.generation == self.generation
            {
                entry.published = Some(Instant::now());
            }
        }
        // Receivers held by the entry and by waiting retries see it; a send error only means none is left.
        let _ = sender.send(Some(outcome));
    }
}

impl<T> Drop for FirstStart<T> {
    fn drop(&mut self) {
        if self.sender.is_some() {
            // Unpublished: the start has nothing to share. Release the token so a retry starts it.
            let mut state = self
                .index
                .shared
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if state
                .entries
                .get(&self.key)
                .is_some_and(|e| e.generation == self.generation)
            {
                state.entries.remove(&self.key);
            }
            // Dropping the sender wakes the waiting retries with `Released`.
        }
    }
}

impl<T: Clone> Retry<T> {
    /// The first start's outcome, waiting at most `wait` (`None`: as long as it takes) for it.
    pub async fn outcome(mut self, wait: Option<Duration>) -> Result<T, RetryError> {
        let ready = self.outcome.wait_for(|o| o.is_some());
        let result = match wait {
            Some(wait) => match tokio::time::timeout(wait, ready).await {
                Ok(r) => r.map(|v| v.clone()),
                Err(_) => return Err(RetryError::Pending),
            },
            None => ready.await.map(|v| v.clone()),
        };
        match result {
            Ok(Some(outcome)) => Ok(outcome),
            _ => Err(RetryError::Released),
        }
    }
}

/// What [`TokenIndex::start_once`] did.
#[derive(Debug)]
pub enum Once<T, R> {
    /// The token already named the same start: its outcome; nothing new was started.
    Attached(T),
    /// The token was new (or released by a start that failed): the start ran, with this answer.
    Ran(R),
    /// The token already named a start with a different request: nothing was started.
    Mismatch,
    /// The first start under the token is still in flight after the wait.
    Pending,
    /// The first start under the token keeps failing before it has an outcome: send the start again.
    Busy,
    /// The start's own task failed (it panicked or was cancelled); the error says how.
    TaskFailed(String),
}

/// How many times [`TokenIndex::start_once`] claims a token that starts keep releasing.
const CLAIM_ROUNDS: usize = 3;

impl<T: Clone + Send + Sync + 'static> TokenIndex<T> {
    /// Starts at most once per token — the one place a surface's idempotent start is carried out. Claims `token`;
    /// when it is new, runs `start` on its own task (a caller that goes away does not take with it the outcome its
    /// retry will ask for) and publishes the outcome `start` returns beside its answer (`None`: the start failed
    /// before it had one, which releases the token). A retry of the same request gets the first start's outcome,
    /// waiting at most `wait` (`None`: as long as it takes); a token released meanwhile is claimed again, a few
    /// rounds at most.
    pub async fn start_once<R, F>(
        &self,
        scope: TokenScope,
        token: &str,
        fingerprint: Fingerprint,
        expired: impl Fn(&TokenScope, &T, Duration) -> bool,
        wait: Option<Duration>,
        start: impl FnOnce() -> F,
    ) -> Once<T, R>
    where
        F: std::future::Future<Output = (R, Option<T>)> + Send + 'static,
        R: Send + 'static,
    {
        let mut start = Some(start);
        for _ in 0..CLAIM_ROUNDS {
            match self.claim(scope.clone(), token, fingerprint, &expired) {
                Claim::Mismatch => return Once::Mismatch,
                Claim::Retry(retry) => match retry.outcome(wait).await {
                    Ok(first) => return Once::Attached(first),
                    Err(RetryError::Pending) => return Once::Pending,
                    // The first start failed and released the token: this one starts it.
                    Err(RetryError::Released) => continue,
                },
                Claim::First(first) => {
                    let Some(start) = start.take() else {
                        return Once::Busy;
                    };
                    let running = start();
                    let task = tokio::spawn(async move {
                        let (answer, outcome) = running.await;
                        if let Some(outcome) = outcome {
                            first.publish(outcome);
                        }
                        answer
                    });
                    return match task.await {
                        Ok(answer) => Once::Ran(answer),
                        Err(e) => Once::TaskFailed(e.to_string()),
                    };
                }
            }
        }
        Once::Busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(session: &str) -> TokenScope {
        TokenScope {
            session: Some(session.into()),
            within: None,
        }
    }

    fn never(_: &TokenScope, _: &u32, _: Duration) -> bool {
        false
    }

    fn fp(s: &str) -> Fingerprint {
        Fingerprint::of([s.as_bytes()])
    }

    #[tokio::test]
    async fn a_retry_gets_the_first_outcome_and_a_different_request_is_refused() {
        let index = TokenIndex::<u32>::new(16);
        let Claim::First(first) = index.claim(scope("a"), "t1", fp("ls"), never) else {
            panic!("a new token is a first start");
        };
        // In flight: a retry waits; a different request is refused at once.
        let Claim::Retry(early) = index.claim(scope("a"), "t1", fp("ls"), never) else {
            panic!("same token, same request: a retry");
        };
        assert!(matches!(
            index.claim(scope("a"), "t1", fp("rm"), never),
            Claim::Mismatch
        ));
        assert_eq!(index.lookup(scope("a"), "t1").0, TokenState::Pending);
        let waiting = tokio::spawn(early.outcome(None));
        first.publish(7);
        assert_eq!(waiting.await.unwrap(), Ok(7));
        let Claim::Retry(late) = index.claim(scope("a"), "t1", fp("ls"), never) else {
            panic!("a retry after the outcome");
        };
        assert_eq!(late.outcome(Some(Duration::ZERO)).await, Ok(7));
        assert_eq!(index.lookup(scope("a"), "t1").0, TokenState::Done(7));
        // Another session's token of the same name is its own.
        assert!(matches!(
            index.claim(scope("b"), "t1", fp("rm"), never),
            Claim::First(_)
        ));
    }

    /// Concurrent starts under one token run the start once and all get its outcome; a start that fails (no
    /// outcome) releases the token to the next; a different request is refused; a waiting retry can give up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn start_once_runs_a_token_once() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let index = TokenIndex::<u32>::new(16);
        let runs = Arc::new(AtomicU32::new(0));
        let (gate, opened) = tokio::sync::oneshot::channel::<()>();
        let start = |runs: Arc<AtomicU32>, gate: Option<tokio::sync::oneshot::Receiver<()>>| {
            move || async move {
                if let Some(gate) = gate {
                    let _ = gate.await;
                }
                let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                (format!("ran {n}"), Some(n))
            }
        };
        let first = tokio::spawn({
            let (index, runs) = (index.clone(), runs.clone());
            async move {
                index
                    .start_once(
                        scope("a"),
                        "t",
                        fp("ls"),
                        never,
                        None,
                        start(runs, Some(opened)),
                    )
                    .await
            }
        });
        // The first start is held at its gate: a retry that may wait 10 ms is told it is pending, a different
        // request is refused, and neither runs anything.
        while index.lookup(scope("a"), "t").0 != TokenState::Pending {
            tokio::task::yield_now().await;
        }
        let impatient = index
            .start_once(
                scope("a"),
                "t",
                fp("ls"),
                never,
                Some(Duration::from_millis(10)),
                start(runs.clone(), None),
            )
            .await;
        assert!(matches!(impatient, Once::Pending), "{impatient:?}");
        let other = index
            .start_once(
                scope("a"),
                "t",
                fp("rm"),
                never,
                None,
                start(runs.clone(), None),
            )
            .await;
        assert!(matches!(other, Once::Mismatch), "{other:?}");
        let patient = tokio::spawn({
            let (index, runs) = (index.clone(), runs.clone());
            async move {
                index
                    .start_once(scope("a"), "t", fp("ls"), never, None, start(runs, None))
                    .await
            }
        });
        gate.send(()).unwrap();
        assert!(matches!(first.await.unwrap(), Once::Ran(ref r) if r == "ran 1"));
        assert!(matches!(patient.await.unwrap(), Once::Attached(1)));
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        // A start that fails releases its token: the next one under it runs.
        let failed: Once<u32, &str> = index
            .start_once(scope("a"), "u", fp("x"), never, None, || async {
                ("failed", None)
            })
            .await;
        assert!(matches!(failed, Once::Ran("failed")));
        let again = index
            .start_once(
                scope("a"),
                "u",
                fp("x"),
                never,
                None,
                start(runs.clone(), None),
            )
            .await;
        assert!(
            matches!(again, Once::Ran(ref r) if r == "ran 2"),
            "{again:?}"
        );
    }

    #[tokio::test]
    async fn an_unpublished_first_start_releases_its_token() {
        let index = TokenIndex::<u32>::new(16);
        let Claim::First(first) = index.claim(scope("a"), "t", fp("x"), never) else {
            panic!("first");
        };
        let Claim::Retry(retry) = index.claim(scope("a"), "t", fp("x"), never) else {
            panic!("retry");
        };
        assert_eq!(
            retry.outcome(Some(Duration::from_millis(10))).await,
            Err(RetryError::Pending)
        );
        let Claim::Retry(retry) = index.claim(scope("a"), "t", fp("x"), never) else {
            panic!("retry");
        };
        drop(first);
        assert_eq!(retry.outcome(None).await, Err(RetryError::Released));
        assert!(index.is_empty());
        // Released: the next claim (any request) is a first start.
        assert!(matches!(
            index.claim(scope("a"), "t", fp("other"), never),
            Claim::First(_)
        ));
    }

    #[tokio::test]
    async fn expired_outcomes_go_and_the_index_stays_bounded() {
        let index = TokenIndex::<u32>::new(3);
        for (i, t) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            match index.claim(scope("s"), t, fp(t), never) {
                Claim::First(f) => f.publish(i as u32),
                _ => panic!("new tokens"),
            }
        }
        assert_eq!(index.len(), 3, "the oldest finished outcomes were dropped");
        assert_eq!(index.lookup(scope("s"), "a").0, TokenState::Unknown);
        assert_eq!(index.lookup(scope("s"), "e").0, TokenState::Done(4));
        // An outcome whose process is gone expires: the token may be used afresh.
        index.state().last_sweep = Instant::now() - SWEEP_EVERY;
        let gone = |_: &TokenScope, o: &u32, _: Duration| *o == 4;
        assert!(matches!(
            index.claim(scope("s"), "e", fp("new"), gone),
            Claim::First(_)
        ));
    }
}
