//! Text rendering of nodes for plans and debug output.

use super::Node;
use std::fmt;

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} {} {}{:?}",
            self.id,
            self.op.name(),
            self.dtype,
            self.shape.as_slice()
        )
    }
}
