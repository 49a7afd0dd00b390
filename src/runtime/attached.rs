//! State that the layers above the runtime keep per device (the graph states of plain
//! evaluations, kept filter spectra), held by the device without the runtime naming its type.

use std::any::{Any, TypeId};
use std::sync::OnceLock;

/// Most kinds of attached state one device holds.
const KINDS: usize = 4;

/// A few values of distinct types, each made on first use and kept for the device's life.
/// The device owns them (they die with it) while their types stay with the layer that uses
/// them, so the runtime imports nothing from above. Lookup is lock-free: a scan of a few
/// set-once slots and a type-id compare.
pub(crate) struct Attached {
    slots: [OnceLock<(TypeId, Box<dyn Any + Send + Sync>)>; KINDS],
}

impl Attached {
    /// No state attached yet.
    pub(crate) const fn new() -> Attached {
        Attached {
            slots: [const { OnceLock::new() }; KINDS],
        }
    }

    /// The device's value of type `T`, made with `T::default()` on first use.
    ///
    /// # Panics
    /// When more than [`KINDS`] types are attached to one device (a programming error,
    /// caught by every test that touches a device).
    pub(crate) fn get<T: Any + Send + Sync + Default>(&self) -> &T {
        let want = TypeId::of::<T>();
        for slot in &self.slots {
            let (id, value) =
                slot.get_or_init(|| (want, Box::new(T::default()) as Box<dyn Any + Send + Sync>));
            if *id == want {
                return value
                    .downcast_ref::<T>()
                    .expect("the slot's type id matches");
            }
        }
        panic!("more than {KINDS} kinds of state attached to one device")
    }
}

impl Default for Attached {
    fn default() -> Attached {
        Attached::new()
    }
}
