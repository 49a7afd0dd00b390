//! One field of a per-thread state struct, used as if it were a `thread_local!` of its own:
//! each layer keeps its per-thread state in one `thread_local!` struct, and its fields are
//! reached through constants of [`Field`] with `LocalKey`'s `with` and `try_with`.

use std::thread::{AccessError, LocalKey};

/// The field of the thread-local struct `S` that `get` projects to.
pub(crate) struct Field<S: 'static, T: 'static> {
    key: &'static LocalKey<S>,
    get: fn(&S) -> &T,
}

impl<S: 'static, T: 'static> Field<S, T> {
    /// The field `get` projects to of the thread-local `key`.
    pub(crate) const fn new(key: &'static LocalKey<S>, get: fn(&S) -> &T) -> Self {
        Field { key, get }
    }

    /// Runs `f` on this thread's field; panics where `LocalKey::with` does (during or after
    /// the destruction of the thread's struct).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        self.key.with(|s| f((self.get)(s)))
    }

    /// Runs `f` on this thread's field, or says that the struct is being or has been
    /// destroyed (`LocalKey::try_with`).
    #[allow(dead_code)]
    pub(crate) fn try_with<R>(&self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        self.key.try_with(|s| f((self.get)(s)))
    }
}
