//! The expression DAG: hash-consed `Node`s behind `Arc`. A node, once evaluated, holds its
//! buffer and drops its inputs, acting as a leaf from then on.

mod display;

use crate::runtime::Buffer;
use crate::Device;
use lazyfuse_codegen::{BinaryOp, DType, RandomKind, ReduceLayout, ReduceOp, Scalar, UnaryOp};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// A small, fast, deterministic hasher (FxHash's mixing) for node keys and plan keys.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn write_u8(&mut self, x: u8) {
        self.write_u64(x as u64);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// `HashMap` hasher built from [`FxHasher`].
pub(crate) type FxBuild = std::hash::BuildHasherDefault<FxHasher>;

/// An array shape.
pub(crate) type Shape = SmallVec<[usize; 4]>;

/// What a node computes. Elementwise ops take inputs of the node's own shape (the API
/// inserts explicit `Broadcast` views); views map the node's indices to their input's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    /// Data created on a device (always realized).
    Buffer,
    /// A 0-d constant; in kernels its value is a parameter.
    Const(Scalar),
    /// `0, 1, .., n-1` as I64 (1-D).
    Iota,
    /// Counter-based random numbers keyed by the seed and the element's linear index.
    Random(RandomKind, u64),
    Unary(UnaryOp),
    Binary(BinaryOp),
    /// `where(cond, a, b)`.
    Where,
    /// `astype(node.dtype)`.
    Cast,
    // --- views ---
    /// Same elements in C order, new shape.
    Reshape,
    /// Axes reordered: output axis `k` is input axis `p[k]`.
    Permute(SmallVec<[usize; 4]>),
    /// NumPy broadcasting of the input to the node's shape.
    Broadcast,
    /// Per axis `(start, step)`: output index `i` reads input index `start + i * step`.
    Slice(SmallVec<[(isize, isize); 4]>),
    /// Constant padding `(before, after)` per axis with the given value.
    Pad(SmallVec<[(usize, usize); 4]>, Scalar),
    /// `roll` along `axis` by `shift` (normalized to `0..n`).
    Roll {
        axis: usize,
        shift: usize,
    },
    /// Concatenation of the inputs along `axis`.
    Concat(usize),
    /// Copy of the input from another device.
    ToDevice,
    /// An unnormalized FFT (a library call; its input is materialized).
    Fft(FftSpec),
    /// Reduction of the last axis of a 2-D `[m, r]` input to `[m]` (the API reshapes any
    /// reduction into this form with views). The layout says where the reduced values lie
    /// in memory; the node's dtype is the op's result dtype.
    Reduce(ReduceOp, ReduceLayout),
    /// Batched matrix product of two operands of rank >= 2 (a library call): the node's
    /// shape is NumPy's result shape, i.e. the broadcast batch axes followed by `[m, n]`
    /// without the axes of length 1 that vector operands gained. Its operands are read from
    /// buffers, through transposes and batch broadcasts where these are free
    /// (`schedule::matmul`).
    MatMul,
}

/// Which FFT an `Op::Fft` node computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FftSpec {
    /// Transformed axes, in the order NumPy applies them (the last one is the real axis of
    /// R2C/C2R transforms).
    pub(crate) axes: SmallVec<[usize; 4]>,
    /// Inverse (positive exponent) transform.
    pub(crate) inverse: bool,
    /// Real/complex variant.
    pub(crate) kind: FftKind,
}

/// Real/complex variant of an FFT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FftKind {
    /// Complex to complex, same shape.
    C2C,
    /// Real to half-spectrum complex (last axis `n -> n/2 + 1`).
    R2C,
    /// Half-spectrum complex to real (last axis `n/2 + 1 -> n`, n = the node's length).
    C2R,
}

impl Op {
    /// True for views that NumPy also makes without copying (fusion-off keeps them fused).
    pub(crate) fn is_free_view(&self) -> bool {
        matches!(
            self,
            Op::Reshape | Op::Permute(_) | Op::Broadcast | Op::Slice(_)
        )
    }
    /// True for elementwise computations.
    pub(crate) fn is_elementwise(&self) -> bool {
        matches!(self, Op::Unary(_) | Op::Binary(_) | Op::Where | Op::Cast)
    }
    /// True for boundaries computed by a library step (their inputs are materialized).
    pub(crate) fn is_library(&self) -> bool {
        matches!(self, Op::ToDevice | Op::Fft(_) | Op::MatMul)
    }
    /// A short name for plans and messages.
    pub(crate) fn name(&self) -> String {
        match self {
            Op::Unary(u) => u.name().to_string(),
            Op::Binary(b) => b.name().to_string(),
            Op::Random(k, _) => format!("random_{k:?}").to_lowercase(),
            Op::Permute(p) => format!("permute{:?}", p.as_slice()),
            Op::Roll { axis, shift } => format!("roll({shift}, axis={axis})"),
            Op::Concat(a) => format!("concat(axis={a})"),
            Op::Const(s) => format!("const({s:?})"),
            Op::Reduce(r, l) => format!("{}({l:?})", r.name()),
            other => format!("{other:?}").to_lowercase(),
        }
    }
}

pub(crate) struct NodeState {
    pub(crate) inputs: Vec<Arc<Node>>,
    pub(crate) buffer: Option<Arc<Buffer>>,
}

/// One node of the DAG.
pub(crate) struct Node {
    pub(crate) id: u64,
    /// Hash of the structure of this node alone (op without constant values or seeds,
    /// dtype, shape, device): the per-node part of plan-cache keys.
    pub(crate) shash: u64,
    pub(crate) op: Op,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) device: Device,
    state: Mutex<NodeState>,
    /// Set when an evaluation took this node's buffer to write in place; hash-consing never
    /// hands the node out again (see [`consume_buffer`]).
    consumed: AtomicBool,
}

#[derive(PartialEq, Eq, Hash)]
struct Key {
    op: Op,
    dtype: DType,
    shape: Shape,
    device: Device,
    inputs: SmallVec<[u64; 3]>,
}

struct Table {
    map: HashMap<Key, Weak<Node>, FxBuild>,
    sweep_at: usize,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn structure_hash(op: &Op, dtype: DType, shape: &Shape, device: &Device) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = FxHasher::default();
    match op {
        Op::Const(_) => 1u8.hash(&mut h),
        Op::Random(kind, _) => (2u8, kind).hash(&mut h),
        op => (3u8, op).hash(&mut h),
    }
    (dtype, shape, device).hash(&mut h);
    h.finish()
}

impl Node {
    /// The node for `op` over `inputs`: an existing equal node when one is alive
    /// (hash-consing), else a new one.
    pub(crate) fn new(
        op: Op,
        dtype: DType,
        shape: Shape,
        device: Device,
        inputs: Vec<Arc<Node>>,
    ) -> Arc<Node> {
        let key = Key {
            op: op.clone(),
            dtype,
            shape: shape.clone(),
            device: device.clone(),
            inputs: inputs.iter().map(|n| n.id).collect(),
        };
        let mut guard = TABLE.lock().unwrap_or_else(|e| e.into_inner());
        let table = guard.get_or_insert_with(|| Table {
            map: HashMap::default(),
            sweep_at: 1024,
        });
        if let Some(n) = table
            .map
            .get(&key)
            .and_then(Weak::upgrade)
            .filter(|n| !n.consumed.load(Relaxed))
        {
            return n;
        }
        let node = Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Relaxed),
            shash: structure_hash(&op, dtype, &shape, &device),
            op,
            dtype,
            shape,
            device,
            state: Mutex::new(NodeState {
                inputs,
                buffer: None,
            }),
            consumed: AtomicBool::new(false),
        });
        table.map.insert(key, Arc::downgrade(&node));
        if table.map.len() >= table.sweep_at {
            table.map.retain(|_, w| w.strong_count() > 0);
            table.sweep_at = (table.map.len() * 2).max(1024);
        }
        node
    }

    /// A realized leaf holding `buffer` (never shared by hash-consing).
    pub(crate) fn leaf(buffer: Buffer, shape: Shape, device: Device) -> Arc<Node> {
        Node::leaf_shared(Arc::new(buffer), shape, device)
    }

    /// A realized leaf holding a buffer that may be shared with other nodes (never shared
    /// by hash-consing).
    pub(crate) fn leaf_shared(buffer: Arc<Buffer>, shape: Shape, device: Device) -> Arc<Node> {
        let shash = structure_hash(&Op::Buffer, buffer.dtype(), &shape, &device);
        Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Relaxed),
            shash,
            op: Op::Buffer,
            dtype: buffer.dtype(),
            shape,
            device,
            state: Mutex::new(NodeState {
                inputs: Vec::new(),
                buffer: Some(buffer),
            }),
            consumed: AtomicBool::new(false),
        })
    }

    /// An unrealized node without inputs, never shared by hash-consing: the output of a
    /// bound plan whose computation is described by the plan, not by the node (traced
    /// functions bind their cached plans to such nodes).
    pub(crate) fn fresh(op: Op, dtype: DType, shape: Shape, device: Device) -> Arc<Node> {
        Arc::new(Node {
            id: NEXT_ID.fetch_add(1, Relaxed),
            shash: structure_hash(&op, dtype, &shape, &device),
            op,
            dtype,
            shape,
            device,
            state: Mutex::new(NodeState {
                inputs: Vec::new(),
                buffer: None,
            }),
            consumed: AtomicBool::new(false),
        })
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The buffer, when realized.
    pub(crate) fn buffer(&self) -> Option<Arc<Buffer>> {
        self.state().buffer.clone()
    }

    /// The inputs (empty once realized).
    pub(crate) fn inputs(&self) -> Vec<Arc<Node>> {
        self.state().inputs.clone()
    }

    /// Stores the node's value; from now on it is a leaf and its inputs are released.
    pub(crate) fn realize(&self, buffer: Arc<Buffer>) {
        let old = {
            let mut s = self.state();
            s.buffer = Some(buffer);
            std::mem::take(&mut s.inputs)
        };
        drop(old); // dropped outside the lock: may cascade into other nodes
    }

    /// Number of elements.
    pub(crate) fn size(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Takes the buffer of the realized node `node` for an evaluation to overwrite, when
/// `unobserved()` (run under the hash-consing lock, so that no other thread can obtain the
/// node meanwhile) confirms that nothing outside the evaluation can read it. From then on
/// hash-consing never returns `node`, and its buffer is gone. `None` when the node holds no
/// buffer, someone else holds the buffer, or `unobserved()` says no.
pub(crate) fn consume_buffer(
    node: &Arc<Node>,
    unobserved: impl FnOnce() -> bool,
) -> Option<Arc<Buffer>> {
    let _table = TABLE.lock().unwrap_or_else(|e| e.into_inner());
    let mut st = node.state();
    if st.buffer.as_ref().is_none_or(|b| Arc::strong_count(b) != 1) {
        return None;
    }
    drop(st);
    if !unobserved() {
        return None;
    }
    node.consumed.store(true, Relaxed);
    st = node.state();
    st.buffer.take()
}

impl Drop for Node {
    fn drop(&mut self) {
        // Release long input chains iteratively so dropping a deep graph cannot overflow
        // the stack.
        let mut stack = std::mem::take(
            &mut self
                .state
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .inputs,
        );
        while let Some(n) = stack.pop() {
            if let Ok(mut inner) = Arc::try_unwrap(n) {
                let s = inner.state.get_mut().unwrap_or_else(|e| e.into_inner());
                stack.append(&mut s.inputs);
            }
        }
    }
}
