//! The expression DAG: hash-consed `Node`s behind `Arc`. A node, once evaluated, holds its
//! buffer and drops its inputs, acting as a leaf from then on.

mod display;
pub(crate) mod support;

use crate::runtime::Buffer;
use crate::Device;
use lazyfuse_codegen::{BinaryOp, DType, RandomKind, ReduceLayout, ReduceOp, Scalar, UnaryOp};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};

/// The fast deterministic hasher of node keys and plan keys (shared with the kernel
/// builder), and its `HashMap` hasher.
pub(crate) use lazyfuse_codegen::ir::{FastBuild as FxBuild, FastHasher as FxHasher};

/// An array shape.
pub(crate) type Shape = SmallVec<[usize; 4]>;

/// What a node computes (rare variants keep their lists boxed so that every node stays
/// small: nodes are built and dropped on every eval). Elementwise ops take inputs of the node's own shape (the API
/// inserts explicit `Broadcast` views); views map the node's indices to their input's.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    /// Data created on a device (always realized).
    Buffer,
    /// A constant: one value at every index of the node's shape (0-d, or a constant
    /// broadcast); in kernels its value is a parameter.
    Const(Scalar),
    /// `0, 1, .., n-1` as I64 (1-D).
    Iota,
    /// Counter-based random numbers keyed by the seed and the element's linear index.
    Random(RandomKind, u64),
    /// Counter-based random numbers whose seed is the value of the input (I64, of the
    /// node's shape: a `random::Key` broadcast), counter = the element's linear index. The
    /// seed is data, so a traced function can take it as an input.
    RandomKeyed(RandomKind),
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
    Permute(Box<[usize]>),
    /// NumPy broadcasting of the input to the node's shape.
    Broadcast,
    /// Per axis `(start, step)`: output index `i` reads input index `start + i * step`.
    Slice(Box<[(isize, isize)]>),
    /// Constant padding `(before, after)` per axis with the given value.
    Pad(Box<[(usize, usize)]>, Scalar),
    /// `roll` along `axis` by `shift` (normalized to `0..n`).
    Roll {
        axis: usize,
        shift: usize,
    },
    /// Concatenation of the inputs along `axis`.
    Concat(usize),
    /// A gather with integer indices: inputs `(source, indices)`, the indices (I64, the
    /// node's shape) say which element of the source's axis `axis` each output element
    /// reads. Output axes `axis..axis + span` stand for that one source axis; the others
    /// map one to one (`take` has `span` = the indices' rank, `take_along_axis` 1).
    /// Negative indices count from the end; an out-of-range one reads zero (the API checks
    /// them separately).
    Gather {
        axis: usize,
        span: usize,
    },
    /// Copy of the input from another device.
    ToDevice,
    /// An unnormalized FFT (a library call; its input is materialized).
    Fft(Box<FftSpec>),
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
    /// The sum of `values[p, i, q]` into zeros of shape `[pre, n, post]` (the node's, `n`
    /// the field) at `[p, indices[p, i, q], q]` (a library step): inputs `values` and I64
    /// `indices`, both `[pre, k, post]`; negative indices count from the end and indices
    /// out of range add nothing. The cotangent of a gather with many indices
    /// (`api::grad`); F32, F64, C64 and C128 values.
    ScatterAdd(usize),
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
    /// C2R only: the input is exactly Hermitian over every transformed axis (the half
    /// spectrum of a Hermitian part, from the `real(ifft*)` rewrite), so one
    /// multi-dimensional C2R transform computes it. Otherwise NumPy's `irfftn` semantics:
    /// complex inverses along the other axes, then C2R with the imaginary parts of the zero
    /// and Nyquist frequencies ignored.
    pub(crate) hermitian: bool,
    /// C2C only: the index ranges along the input's last axis outside which the input is
    /// exactly zero (a zero padding, from its structure: `support::nonzero_ranges`), when
    /// that axis and the one before it are transformed. A device may then skip the lines
    /// that hold only zeros (cuFFT: the pruned first pass of `cuda::fft::plan`).
    pub(crate) support: Option<Box<[(usize, usize)]>>,
}

impl FftSpec {
    /// The library call's name in profiles and NVTX ranges: `fft axes=[0, 1]`, with
    /// ` inverse` for inverse transforms.
    pub(crate) fn label(&self) -> String {
        let inverse = if self.inverse { " inverse" } else { "" };
        format!("fft axes={:?}{inverse}", self.axes)
    }

    /// The shape generated FFT passes plan this transform over, from its input's and
    /// output's: the array's for C2C (`None` where the two differ), the real array's for R2C
    /// (its input) and C2R (its output; `None` unless the input is exactly the half
    /// spectrum: cuFFT's program also truncates or pads it).
    pub(crate) fn passes_shape<'a>(
        &self,
        in_shape: &'a [usize],
        out_shape: &'a [usize],
    ) -> Option<&'a [usize]> {
        match self.kind {
            FftKind::C2C => (in_shape == out_shape).then_some(in_shape),
            FftKind::R2C => Some(in_shape),
            FftKind::C2R => {
                let (&h, hr) = in_shape.split_last()?;
                let (&n, nr) = out_shape.split_last()?;
                (h == n / 2 + 1 && hr == nr).then_some(out_shape)
            }
        }
    }

    /// The complex dtype generated FFT passes compute this transform in, from its input's
    /// and output's: the spectrum's (`None` for a C2C transform whose ends differ).
    pub(crate) fn passes_dtype(&self, in_dtype: DType, out_dtype: DType) -> Option<DType> {
        match self.kind {
            FftKind::C2C => (in_dtype == out_dtype).then_some(in_dtype),
            FftKind::R2C => Some(out_dtype),
            FftKind::C2R => Some(in_dtype),
        }
    }
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
        matches!(
            self,
            Op::ToDevice | Op::Fft(_) | Op::MatMul | Op::ScatterAdd(_)
        )
    }
    /// A short name for plans and messages.
    pub(crate) fn name(&self) -> String {
        match self {
            Op::Unary(u) => u.name().to_string(),
            Op::Binary(b) => b.name().to_string(),
            Op::Random(k, _) | Op::RandomKeyed(k) => format!("random_{k:?}").to_lowercase(),
            Op::Permute(p) => format!("permute{:?}", &p[..]),
            Op::Roll { axis, shift } => format!("roll({shift}, axis={axis})"),
            Op::Concat(a) => format!("concat(axis={a})"),
            Op::ScatterAdd(n) => format!("scatter_add(n={n})"),
            Op::Const(s) => format!("const({s:?})"),
            Op::Reduce(r, l) => format!("{}({l:?})", r.name()),
            other => format!("{other:?}").to_lowercase(),
        }
    }
}

/// A node's inputs (inline for up to three: no heap allocation for most nodes).
pub(crate) type Inputs = SmallVec<[Arc<Node>; 3]>;

pub(crate) struct NodeState {
    pub(crate) inputs: Inputs,
    pub(crate) buffer: Option<Arc<Buffer>>,
}

/// Deferred checks of an expression (the index-range checks of gathers): flags (Bool 0-d
/// nodes, true when the check failed) with their messages. A node carries the checks of
/// everything it was computed from, and keeps them once realized, so every readback of
/// every dependent of a failed check fails, every time.
pub(crate) struct Checks {
    pub(crate) items: Vec<(Arc<Node>, Arc<str>)>,
    /// The outcome, once read: the failed checks' messages, or `None` when all passed.
    pub(crate) verdict: OnceLock<Option<Arc<str>>>,
}

impl Checks {
    /// Checks not read yet.
    pub(crate) fn new(items: Vec<(Arc<Node>, Arc<str>)>) -> Checks {
        Checks {
            items,
            verdict: OnceLock::new(),
        }
    }

    /// The union of the checks of `inputs` (shared when only one input has any).
    pub(crate) fn union<'a>(inputs: impl Iterator<Item = &'a Arc<Node>>) -> Option<Arc<Checks>> {
        let mut found: Option<Arc<Checks>> = None;
        let mut merged: Option<Vec<(Arc<Node>, Arc<str>)>> = None;
        for n in inputs {
            let Some(c) = &n.checks else { continue };
            match (&found, &mut merged) {
                (None, _) => found = Some(c.clone()),
                (Some(f), None) if Arc::ptr_eq(f, c) => {}
                (Some(f), m) => {
                    let items = m.get_or_insert_with(|| f.items.clone());
                    for it in &c.items {
                        if !items.iter().any(|(x, _)| Arc::ptr_eq(x, &it.0)) {
                            items.push(it.clone());
                        }
                    }
                }
            }
        }
        match merged {
            Some(items) => Some(Arc::new(Checks::new(items))),
            None => found,
        }
    }
}

/// One node of the DAG.
///
/// Hash-consing is lazy: building looks for an equal *realized* node (so that a live
/// evaluated result is handed back instead of recomputed), and a node enters the table only
/// when it is realized. Unrealized nodes never touch the table, which keeps building and
/// dropping the intermediate nodes of an expression free of locks and table updates; equal
/// unrealized subexpressions built separately are separate nodes (the kernel builder still
/// computes equal IR once).
pub(crate) struct Node {
    pub(crate) id: u64,
    /// Hash of the structure of this node alone (op without constant values or seeds,
    /// dtype, shape, device): the per-node part of plan-cache keys.
    pub(crate) shash: u64,
    /// Structural key of the expression under this node, built incrementally at creation
    /// from `shash` and the inputs' keys (an input realized by then counts as a leaf): the
    /// hint by which an eval finds its cached plan without walking the DAG. Only a hint:
    /// the plan found is verified against the DAG structurally (`schedule::Skeleton`).
    skey: u64,
    /// Set once the node holds a buffer (never cleared): lets [`Node::use_key`] read
    /// realized-ness without the state lock.
    has_buffer: AtomicBool,
    pub(crate) op: Op,
    pub(crate) dtype: DType,
    pub(crate) shape: Shape,
    pub(crate) device: Device,
    /// Hash-consing identity: the ids of the inputs the node was built from (kept after
    /// realization drops the inputs themselves).
    input_ids: SmallVec<[u64; 3]>,
    /// Hash of (op with values, dtype, shape, device, input ids) for nodes that hash-consing
    /// may share, else `None`.
    interned: Option<u64>,
    /// Set once the realized node is in the hash-consing table (it removes itself on drop).
    in_table: AtomicBool,
    state: Mutex<NodeState>,
    /// The deferred checks this node's value depends on (see [`Checks`]).
    checks: Option<Arc<Checks>>,
    /// Set when an evaluation took this node's buffer to write in place; hash-consing never
    /// hands the node out again (see [`consume_buffer`]).
    consumed: AtomicBool,
    /// Set while a step that overwrites a consumed buffer beneath this node runs (its
    /// inputs are detached meanwhile; see [`consume_buffer`]).
    pending: AtomicBool,
}

/// The hash-consing table, sharded by key hash so that threads building different nodes
/// rarely meet on one lock. A node removes its own entry when it drops, so the table holds
/// live nodes only (no sweeps).
const SHARDS: usize = 64;

/// Buckets of nodes by key hash (the hash is already mixed: identity hashing).
type Bucket = HashMap<u64, SmallVec<[Weak<Node>; 1]>, std::hash::BuildHasherDefault<IdHasher>>;

/// Passes a precomputed 64-bit hash through.
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// One shard of the hash-consing table, with its entry count readable without the lock.
struct Shard {
    table: Mutex<Bucket>,
    len: AtomicUsize,
}

impl Shard {
    const fn new() -> Shard {
        Shard {
            table: Mutex::new(HashMap::with_hasher(std::hash::BuildHasherDefault::new())),
            len: AtomicUsize::new(0),
        }
    }
}

/// The graph's process-wide state: nodes of every device and thread meet here.
struct Graph {
    /// The hash-consing table of realized nodes.
    shards: [Shard; SHARDS],
    /// Start of the next block of node ids ([`ID_BLOCK`] ids each).
    next_id: AtomicU64,
    /// Waiters on pending nodes (see [`Node::settled_state`]).
    settled: (Mutex<()>, Condvar),
}

static GRAPH: Graph = Graph {
    shards: [const { Shard::new() }; SHARDS],
    next_id: AtomicU64::new(1),
    settled: (Mutex::new(()), Condvar::new()),
};

fn shards() -> &'static [Shard] {
    &GRAPH.shards
}

fn shard_index(hash: u64) -> usize {
    (hash >> 58) as usize % SHARDS
}

fn lock_shard(s: &Shard) -> MutexGuard<'_, Bucket> {
    s.table.lock().unwrap_or_else(|e| e.into_inner())
}

fn shard(hash: u64) -> MutexGuard<'static, Bucket> {
    lock_shard(&shards()[shard_index(hash)])
}

/// Ids are handed to threads in blocks, so that threads building nodes at once do not
/// contend on one counter's cache line.
const ID_BLOCK: u64 = 1024;

/// This thread's part of the graph: its block of node ids and its recent constants.
struct ThreadGraph {
    /// The next id of this thread's block and the block's end.
    ids: std::cell::Cell<(u64, u64)>,
    /// Constants built lately on this thread (see [`RecentConsts`]).
    recent: std::cell::RefCell<RecentConsts>,
}

thread_local! {
    static THREAD: ThreadGraph = const {
        ThreadGraph {
            ids: std::cell::Cell::new((0, 0)),
            recent: std::cell::RefCell::new(RecentConsts {
                nodes: [const { None }; CONSTS],
                next: 0,
            }),
        }
    };
}

/// A process-unique node id.
fn next_id() -> u64 {
    THREAD
        .try_with(|t| {
            let (next, end) = t.ids.get();
            if next < end {
                t.ids.set((next + 1, end));
                next
            } else {
                let start = GRAPH.next_id.fetch_add(ID_BLOCK, Relaxed);
                t.ids.set((start + 1, start + ID_BLOCK));
                start
            }
        })
        .unwrap_or_else(|_| GRAPH.next_id.fetch_add(1, Relaxed))
}

/// Mixes a 64-bit value into a structural key (the finalizer of splitmix64).
pub(crate) fn mix(h: u64, x: u64) -> u64 {
    let mut z = (h ^ x.rotate_left(23)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The structural key of a realized node of structure `shash` used as an input.
fn leaf_key(shash: u64) -> u64 {
    mix(shash, 0x6c65_6166)
}

/// Constants built recently on this thread: the scalars of an expression rebuilt every
/// step (`x * 2.0 - 1.0`) come back as the same nodes instead of a new node each (an
/// allocation, hashing and a drop). A constant node has no inputs and never changes, so
/// sharing it is sharing by value; the cache holds `CONSTS` nodes, oldest replaced first.
const CONSTS: usize = 8;

struct RecentConsts {
    nodes: [Option<Arc<Node>>; CONSTS],
    next: usize,
}

fn recent_const(op: &Op, dtype: DType, shape: &Shape, device: &Device) -> Option<Arc<Node>> {
    THREAD
        .try_with(|t| {
            let r = t.recent.try_borrow().ok()?;
            r.nodes
                .iter()
                .flatten()
                .find(|n| {
                    n.op == *op
                        && n.dtype == dtype
                        && n.shape == *shape
                        && n.device == *device
                        && !n.consumed.load(Relaxed)
                        && n.buffer().is_none()
                })
                .cloned()
        })
        .ok()
        .flatten()
}

/// Drops `node` from this thread's recent constants (it was realized: a cache entry must
/// not keep its buffer alive or block reusing that buffer in place).
fn forget_const(node: &Node) {
    let _ = THREAD.try_with(|t| {
        if let Ok(mut r) = t.recent.try_borrow_mut() {
            let mut old = None;
            for slot in r.nodes.iter_mut() {
                if slot.as_ref().is_some_and(|n| std::ptr::eq(&**n, node)) {
                    old = slot.take();
                }
            }
            drop(r);
            drop(old);
        }
    });
}

fn remember_const(node: &Arc<Node>) {
    let _ = THREAD.try_with(|t| {
        if let Ok(mut r) = t.recent.try_borrow_mut() {
            let i = r.next;
            // the replaced node drops after the borrow ends (a drop never re-enters here:
            // a constant has no inputs)
            let old = r.nodes[i].replace(node.clone());
            r.next = (i + 1) % CONSTS;
            drop(r);
            drop(old);
        }
    });
}

fn structure_hash(op: &Op, dtype: DType, shape: &Shape, device: &Device) -> u64 {
    use std::hash::{Hash, Hasher};
    // the ops of nearly every node as small codes: no hasher walk over the enum
    let code = match op {
        Op::Const(_) => 1,
        Op::Unary(u) => 0x100 | *u as u64,
        Op::Binary(b) => 0x200 | *b as u64,
        Op::Buffer => 2,
        Op::Iota => 3,
        Op::Where => 4,
        Op::Cast => 5,
        Op::Reshape => 6,
        Op::Broadcast => 7,
        Op::Random(kind, _) => {
            let mut h = FxHasher::default();
            (2u8, kind).hash(&mut h);
            h.finish() | 1 << 63
        }
        op => {
            let mut h = FxHasher::default();
            (3u8, op).hash(&mut h);
            h.finish() | 1 << 63
        }
    };
    let dev = match device {
        Device::Cpu => 0,
        Device::Cuda(d) => 1 + d.ordinal() as u64,
    };
    // word-wise multiply-rotate mixing, one avalanche at the end
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, x: u64| (h.rotate_left(5) ^ x).wrapping_mul(K);
    let mut h = step(step(code, dtype as u64 | dev << 8), shape.len() as u64);
    for &d in shape {
        h = step(h, d as u64);
    }
    mix(h, 0)
}

/// The hash-consing key hash: the structure hash, constant values and seeds, and inputs.
fn key_hash(shash: u64, op: &Op, inputs: &[u64]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = FxHasher(shash);
    match op {
        Op::Const(s) => s.hash(&mut h),
        Op::Random(_, seed) => seed.hash(&mut h),
        _ => {}
    }
    for &i in inputs {
        h.write_u64(i);
    }
    // final avalanche so that the shard index (top bits) and bucket bits are well mixed
    let mut x = h.finish();
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

/// A new node, written straight into its allocation: `Arc::new(Node { .. })` builds the
/// node on the stack first and copies it across the allocator call (a 264-byte copy whose
/// loads of freshly stored bytes stall store forwarding, on every node built). The
/// allocation comes first here, so the fields are stored once, in place.
macro_rules! place_node {
    ($($field:ident : $value:expr),* $(,)?) => {{
        $(#[allow(clippy::redundant_locals)]
        let $field = $value;)*
        let slot = Arc::<Node>::new_uninit();
        let ptr = Arc::as_ptr(&slot) as *mut std::mem::MaybeUninit<Node>;
        // SAFETY: `slot` was just allocated and is the only reference to it, so writing
        // through its pointer races with nothing; the value is whole before
        // `assume_init`.
        unsafe {
            (*ptr).write(Node { $($field),* });
            slot.assume_init()
        }
    }};
}

impl Node {
    /// The node for `op` over `inputs`: an existing equal node when one is alive
    /// (hash-consing), else a new one.
    pub(crate) fn new(
        op: Op,
        dtype: DType,
        shape: Shape,
        device: Device,
        inputs: Inputs,
    ) -> Arc<Node> {
        let checks = Checks::union(inputs.iter());
        Node::with_checks(op, dtype, shape, device, inputs, checks)
    }

    /// [`Node::new`] with the deferred checks given (instead of the inputs' union). A node
    /// handed back by hash-consing keeps its own checks, made from equal inputs.
    pub(crate) fn with_checks(
        op: Op,
        dtype: DType,
        shape: Shape,
        device: Device,
        inputs: Inputs,
        checks: Option<Arc<Checks>>,
    ) -> Arc<Node> {
        let is_const = matches!(op, Op::Const(_)) && inputs.is_empty();
        if is_const {
            if let Some(n) = recent_const(&op, dtype, &shape, &device) {
                return n;
            }
        }
        let shash = structure_hash(&op, dtype, &shape, &device);
        let mut input_ids: SmallVec<[u64; 3]> = SmallVec::new();
        for n in &inputs {
            input_ids.push(n.id);
        }
        let kh = key_hash(shash, &op, &input_ids);
        let slot = &shards()[shard_index(kh)];
        // only realized nodes are in the table: most shards are empty in a loop that keeps
        // few results alive, and an empty one is skipped without its lock (a node being
        // inserted meanwhile is missed, which only forgoes sharing)
        if slot.len.load(Relaxed) != 0 {
            let mut rejected: SmallVec<[Arc<Node>; 1]> = SmallVec::new();
            let table = lock_shard(slot);
            if let Some(bucket) = table.get(&kh) {
                for w in bucket {
                    let Some(n) = w.upgrade() else { continue };
                    if n.shash == shash
                        && n.dtype == dtype
                        && n.input_ids == input_ids
                        && n.shape == shape
                        && n.op == op
                        && n.device == device
                        && !n.consumed.load(Relaxed)
                    {
                        drop(table);
                        return n;
                    }
                    // dropped after the lock is released: dropping a node takes its shard lock
                    rejected.push(n);
                }
            }
            drop(table);
            drop(rejected);
        }
        let mut skey = mix(shash, inputs.len() as u64);
        for n in &inputs {
            skey = mix(skey, n.use_key());
        }
        let node = place_node! {
            id: next_id(),
            shash: shash,
            skey: skey,
            has_buffer: AtomicBool::new(false),
            op: op,
            dtype: dtype,
            shape: shape,
            device: device,
            input_ids: input_ids,
            interned: Some(kh),
            checks: checks,
            in_table: AtomicBool::new(false),
            state: Mutex::new(NodeState {
                inputs,
                buffer: None,
            }),
            consumed: AtomicBool::new(false),
            pending: AtomicBool::new(false),
        };
        if is_const {
            remember_const(&node);
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
        let dtype = buffer.dtype();
        Node::unshared(Op::Buffer, dtype, shape, device, Some(buffer))
    }

    /// An unrealized node without inputs, never shared by hash-consing: the output of a
    /// bound plan whose computation is described by the plan, not by the node (traced
    /// functions bind their cached plans to such nodes).
    pub(crate) fn fresh(op: Op, dtype: DType, shape: Shape, device: Device) -> Arc<Node> {
        Node::unshared(op, dtype, shape, device, None)
    }

    fn unshared(
        op: Op,
        dtype: DType,
        shape: Shape,
        device: Device,
        buffer: Option<Arc<Buffer>>,
    ) -> Arc<Node> {
        let shash = structure_hash(&op, dtype, &shape, &device);
        place_node! {
            id: next_id(),
            shash: shash,
            // a fresh node has no inputs: its own structure is its key
            skey: mix(shash, 0),
            has_buffer: AtomicBool::new(buffer.is_some()),
            op: op,
            dtype: dtype,
            shape: shape,
            device: device,
            input_ids: SmallVec::new(),
            interned: None,
            checks: None,
            in_table: AtomicBool::new(false),
            state: Mutex::new(NodeState {
                inputs: Inputs::new(),
                buffer,
            }),
            consumed: AtomicBool::new(false),
            pending: AtomicBool::new(false),
        }
    }

    /// The ids of the inputs this node was built from (kept after realization drops the
    /// inputs themselves).
    pub(crate) fn input_ids(&self) -> &[u64] {
        &self.input_ids
    }

    /// The deferred checks this node's value depends on.
    pub(crate) fn checks(&self) -> Option<&Arc<Checks>> {
        self.checks.as_ref()
    }

    /// The structural key of the expression under this node (a hint: equal expressions
    /// have equal keys, unequal ones almost always differ).
    pub(crate) fn structure_key(&self) -> u64 {
        self.skey
    }

    /// This node's part of the structural key of an expression that reads it: a leaf's
    /// key once it holds a buffer, else the key of the expression under it.
    pub(crate) fn use_key(&self) -> u64 {
        if self.has_buffer.load(Relaxed) {
            leaf_key(self.shash)
        } else {
            self.skey
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state, once the node is not pending: while a step that overwrites a buffer
    /// beneath it runs in another thread (see [`consume_buffer`]), this waits for the step
    /// to realize the node or give its inputs back.
    pub(crate) fn settled_state(&self) -> MutexGuard<'_, NodeState> {
        loop {
            let st = self.state();
            if st.buffer.is_some() || !self.pending.load(SeqCst) {
                return st;
            }
            drop(st);
            let mut g = GRAPH.settled.0.lock().unwrap_or_else(|e| e.into_inner());
            while self.pending.load(SeqCst) {
                g = GRAPH.settled.1.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
    }

    /// The buffer, when realized.
    pub(crate) fn buffer(&self) -> Option<Arc<Buffer>> {
        self.state().buffer.clone()
    }

    /// The inputs (empty once realized).
    pub(crate) fn inputs(&self) -> Inputs {
        self.settled_state().inputs.clone()
    }

    /// Stores the node's value; from now on it is a leaf and its inputs are released.
    pub(crate) fn realize(self: &Arc<Self>, buffer: Arc<Buffer>) {
        let old = {
            let mut s = self.state();
            s.buffer = Some(buffer);
            self.has_buffer.store(true, Relaxed);
            std::mem::take(&mut s.inputs)
        };
        if matches!(self.op, Op::Const(_)) {
            forget_const(self);
        }
        self.intern();
        if self.pending.swap(false, SeqCst) {
            notify_settled();
        }
        drop(old); // dropped outside the lock: may cascade into other nodes
    }

    /// Enters a realized node into the hash-consing table (once), so that building an equal
    /// node hands this one back.
    fn intern(self: &Arc<Self>) {
        let Some(kh) = self.interned else { return };
        if self.consumed.load(Relaxed) || self.in_table.swap(true, Relaxed) {
            return;
        }
        let slot = &shards()[shard_index(kh)];
        let mut table = lock_shard(slot);
        table.entry(kh).or_default().push(Arc::downgrade(self));
        slot.len.store(table.len(), Relaxed);
    }

    /// Number of elements.
    pub(crate) fn size(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Takes the buffer of the realized node `node` for an evaluation to overwrite, when
/// `unobserved()` confirms that nothing outside the evaluation can read it. From then on
/// hash-consing never returns `node`, and its buffer is gone. `None` when the node holds no
/// buffer, someone else holds the buffer, the buffer is external memory (lent by another
/// owner through `from_cuda_ptr` or `from_dlpack`: never written), or `unobserved()` says
/// no.
///
/// `tips` are the nodes the overwriting step computes. The check runs under the node's
/// hash-consing shard lock (no other thread can obtain `node` meanwhile) and the tips'
/// state locks (no tip is realized meanwhile); when it passes, the tips are detached from
/// their inputs and marked pending: a thread that holds a tip and walks it from now on waits
/// until the tip is realized (or restored) instead of reaching, through the tip, nodes
/// beneath it whose buffer is being overwritten. The returned [`Detached`] puts the inputs
/// back on tips that are still unrealized when it drops (a failed step).
pub(crate) fn consume_buffer(
    node: &Arc<Node>,
    tips: &[Arc<Node>],
    unobserved: impl FnOnce() -> bool,
) -> Option<(Arc<Buffer>, Detached)> {
    // no other thread can obtain the node by hash-consing while its shard is locked
    let _table = node.interned.map(shard);
    let mut st = node.state();
    if st
        .buffer
        .as_ref()
        .is_none_or(|b| Arc::strong_count(b) != 1 || b.is_external())
    {
        return None;
    }
    drop(st);
    // Hold the tips' states (in id order, so two evaluations of one step cannot deadlock)
    // across the check: no tip can be realized (which drops its input edges and would make
    // a reference count look explained), detached or restored meanwhile.
    let mut order: SmallVec<[&Arc<Node>; 4]> = tips.iter().collect();
    order.sort_by_key(|t| t.id);
    order.dedup_by_key(|t| t.id);
    let mut guards: SmallVec<[MutexGuard<'_, NodeState>; 4]> =
        order.iter().map(|t| t.state()).collect();
    let settled = order
        .iter()
        .zip(&guards)
        .all(|(t, g)| g.buffer.is_none() && !t.pending.load(SeqCst));
    if !settled || !unobserved() {
        return None; // computed or being computed by another evaluation, or observed
    }
    let mut detached = Detached {
        tips: SmallVec::new(),
    };
    for (t, g) in order.iter().zip(guards.iter_mut()) {
        t.pending.store(true, SeqCst);
        let inputs = std::mem::take(&mut g.inputs);
        detached.tips.push(((*t).clone(), inputs));
    }
    drop(guards);
    node.consumed.store(true, Relaxed);
    st = node.state();
    let buf = st.buffer.take()?;
    Some((buf, detached))
}

/// Inputs taken from the tips of a step that overwrites a consumed buffer (see
/// [`consume_buffer`]); dropped after the step, they are released, or put back on tips the
/// step did not realize.
pub(crate) struct Detached {
    tips: SmallVec<[(Arc<Node>, Inputs); 2]>,
}

impl Drop for Detached {
    fn drop(&mut self) {
        let mut released: SmallVec<[Inputs; 2]> = SmallVec::new();
        for (t, inputs) in self.tips.drain(..) {
            let mut ts = t.state();
            if ts.buffer.is_none() {
                ts.inputs = inputs;
            } else {
                released.push(inputs);
            }
            drop(ts);
            if t.pending.swap(false, SeqCst) {
                notify_settled();
            }
        }
        drop(released); // outside every lock: may cascade into other nodes
    }
}

/// Waiters for pending nodes (see [`Node::settled_state`]).
fn notify_settled() {
    let _g = GRAPH.settled.0.lock().unwrap_or_else(|e| e.into_inner());
    GRAPH.settled.1.notify_all();
}

impl Drop for Node {
    fn drop(&mut self) {
        if let (Some(kh), true) = (self.interned, *self.in_table.get_mut()) {
            // This node's entry is dead now (no strong reference is left; when the node was
            // moved out of its `Arc` below, `self` is no longer at the entry's address, so
            // dead entries are recognized by their count, not their address).
            let slot = &shards()[shard_index(kh)];
            let mut table = lock_shard(slot);
            if let Some(bucket) = table.get_mut(&kh) {
                // the common case, one node per key: that entry is this node's
                if bucket.len() == 1 && bucket[0].strong_count() == 0 {
                    table.remove(&kh);
                } else {
                    bucket.retain(|w| w.strong_count() > 0);
                    if bucket.is_empty() {
                        table.remove(&kh);
                    }
                }
            }
            slot.len.store(table.len(), Relaxed);
        }
        // Release long input chains iteratively so dropping a deep graph cannot overflow
        // the stack: the inputs of an input this node held the last reference to are taken
        // here, so that input drops shallowly, and are released by this loop (the stack
        // stays inline for small graphs). `get_mut` succeeds only for the last reference
        // with no table entry: a node in the table is realized and has no inputs, so
        // dropping it directly cannot recurse deeply.
        let own = &mut self
            .state
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .inputs;
        if own.is_empty() {
            return;
        }
        let mut stack: SmallVec<[Arc<Node>; 8]> = SmallVec::new();
        let mut inputs = std::mem::take(own);
        loop {
            for mut n in inputs {
                if let Some(inner) = Arc::get_mut(&mut n) {
                    let s = inner.state.get_mut().unwrap_or_else(|e| e.into_inner());
                    if !s.inputs.is_empty() {
                        stack.push(n);
                    }
                }
            }
            let Some(mut n) = stack.pop() else { break };
            inputs = match Arc::get_mut(&mut n) {
                Some(inner) => {
                    let s = inner.state.get_mut().unwrap_or_else(|e| e.into_inner());
                    std::mem::take(&mut s.inputs)
                }
                None => Inputs::new(),
            };
        }
    }
}
