//! Reverse-mode gradients over the lazy DAG (`lf::grad`, `lf::value_and_grad`, `lf::vjp`,
//! `Array::stop_gradient`): the backward pass is built from the same array operations as the
//! forward one, so it stays lazy, plans and fuses like any expression, and traces inside
//! `Function`.

use super::make;
use crate::graph::{FftKind, FftSpec, Inputs, Node, Op};
use crate::{where_, Array, DType, Error, Result};
use lazyfuse_codegen::{BinaryOp, ReduceLayout, ReduceOp, UnaryOp};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

impl Array {
    /// The same values, through which no gradient flows (JAX's `stop_gradient`): `grad` and
    /// `vjp` treat the result as a constant.
    pub fn stop_gradient(&self) -> Array {
        // a reshape to the array's own shape: a free identity view that the API builds for
        // nothing else (`reshape_to` returns the array itself for an equal shape), so the
        // backward walk can tell it apart
        make(
            Op::Reshape,
            self.dtype(),
            self.node.shape.clone(),
            &self.node.device,
            &[self],
        )
    }
}

/// The gradients of the real 0-d `loss` with respect to each of `wrt` (same shapes and
/// dtypes as `wrt`; zeros for an array the loss does not depend on). Lazy: they evaluate in
/// one plan with the loss and with each other.
///
/// An array evaluated before the gradient is asked for is a constant (its expression is
/// gone, as a concrete array is to JAX's `grad`); use [`value_and_grad`] to evaluate the
/// loss with its gradients.
///
/// Errors: a loss that is not a real 0-d array, an operation on the path without a gradient
/// rule (named in the error), or an array evaluated straight from one of `wrt` (its
/// gradient would vanish).
pub fn grad(loss: &Array, wrt: &[&Array]) -> Result<Vec<Array>> {
    if loss.ndim() != 0 || !loss.dtype().is_float() {
        return Err(Error::Unsupported {
            op: "grad",
            msg: format!(
                "the loss must be a real 0-d array, not {} of shape {:?} (use vjp)",
                loss.dtype(),
                loss.shape()
            ),
        });
    }
    let one = Array::full_on(&[], 1.0f64, loss.dtype(), &loss.device());
    vjp(&[loss], &[&one], wrt)
}

/// The loss and its gradients ([`grad`]), all lazy, evaluated together.
pub fn value_and_grad(loss: &Array, wrt: &[&Array]) -> Result<(Array, Vec<Array>)> {
    let g = grad(loss, wrt)?;
    Ok((loss.clone(), g))
}

/// Vector-Jacobian products: the gradients with respect to `wrt` of
/// `sum_k sum(outputs[k] * cotangents[k])`, each cotangent of its output's shape and dtype.
pub fn vjp(outputs: &[&Array], cotangents: &[&Array], wrt: &[&Array]) -> Result<Vec<Array>> {
    if outputs.len() != cotangents.len() {
        return Err(Error::Shape {
            op: "vjp",
            msg: format!(
                "{} outputs but {} cotangents",
                outputs.len(),
                cotangents.len()
            ),
        });
    }
    for (o, c) in outputs.iter().zip(cotangents) {
        if o.shape() != c.shape() || o.dtype() != c.dtype() {
            return Err(Error::Shape {
                op: "vjp",
                msg: format!(
                    "a cotangent of shape {:?} ({}) for an output of shape {:?} ({})",
                    c.shape(),
                    c.dtype(),
                    o.shape(),
                    o.dtype()
                ),
            });
        }
        if o.device() != c.device() {
            return Err(Error::DeviceMismatch {
                op: "vjp",
                a: o.device().to_string(),
                b: c.device().to_string(),
            });
        }
    }
    for w in wrt {
        if !w.dtype().is_inexact() {
            return Err(Error::Unsupported {
                op: "grad",
                msg: format!(
                    "no gradient with respect to a {} array (floating and complex dtypes only)",
                    w.dtype()
                ),
            });
        }
    }
    let targets: HashSet<u64> = wrt.iter().map(|w| w.node.id).collect();
    for o in outputs {
        // an evaluated output has no expression left: every gradient would be zero
        if o.is_evaluated() && !is_leaf_op(&o.node.op) && !targets.contains(&o.node.id) {
            return Err(Error::Unsupported {
                op: "grad",
                msg: format!(
                    "the output ({} of shape {:?}) was evaluated before the gradient was \
                     asked for, so the expression under it is gone: ask with \
                     `value_and_grad` (the loss and its gradients evaluate together)",
                    o.dtype(),
                    o.shape()
                ),
            });
        }
    }
    let order = reverse_order(outputs, &targets)?;
    // the nodes some target lies beneath (the walk lists inputs after their users): only
    // their cotangents are built on
    let mut needed: HashSet<u64> = HashSet::new();
    for (node, inputs) in order.iter().rev() {
        if targets.contains(&node.id) || inputs.iter().any(|i| needed.contains(&i.id)) {
            needed.insert(node.id);
        }
    }
    let mut cot: HashMap<u64, Array> = HashMap::new();
    for (o, c) in outputs.iter().zip(cotangents) {
        accumulate(&mut cot, &o.node, (*c).clone());
    }
    for (node, inputs) in &order {
        let Some(g) = cot.get(&node.id).cloned() else {
            continue;
        };
        // leaves, evaluated arrays (constants) and stop markers pass nothing on
        if inputs.is_empty() || !node.dtype.is_inexact() || is_stop(node, inputs) {
            continue;
        }
        for (input, gi) in rule(node, inputs, g, &needed)? {
            if needed.contains(&input.id) {
                accumulate(&mut cot, &input, gi);
            }
        }
    }
    Ok(wrt
        .iter()
        .map(|w| match cot.remove(&w.node.id) {
            Some(g) => g,
            None => Array::zeros_on(w.shape(), w.dtype(), &w.device()),
        })
        .collect())
}

/// Adds `g` to `node`'s cotangent (first one: taken as it is). A cotangent of another dtype
/// (a mixed-precision path) is converted to the node's.
fn accumulate(cot: &mut HashMap<u64, Array>, node: &Arc<Node>, g: Array) {
    let g = if g.dtype() == node.dtype {
        g
    } else {
        g.astype(node.dtype)
    };
    match cot.remove(&node.id) {
        Some(prev) => cot.insert(node.id, &prev + &g),
        None => cot.insert(node.id, g),
    };
}

/// The nodes the outputs depend on through differentiable paths, users before inputs, each
/// with its inputs as the walk read them (one consistent snapshot: another thread may
/// evaluate a node meanwhile, which drops its inputs). Iterative: no recursion on graph
/// depth. The walk does not enter nodes without floating or complex values (conditions,
/// indices) or `stop_gradient` markers: no cotangent flows there.
fn reverse_order(outputs: &[&Array], targets: &HashSet<u64>) -> Result<Vec<(Arc<Node>, Inputs)>> {
    // post-order DFS (inputs first), then reversed
    let mut post: Vec<(Arc<Node>, Inputs)> = Vec::new();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut stack: Vec<(Arc<Node>, Option<Inputs>)> =
        outputs.iter().map(|o| (o.node.clone(), None)).collect();
    while let Some((n, expanded)) = stack.pop() {
        if let Some(inputs) = expanded {
            post.push((n, inputs));
            continue;
        }
        if !seen.insert(n.id) {
            continue;
        }
        // settled: a node whose buffer another thread is overwriting in place has its
        // inputs detached until that step ends
        let st = n.settled_state();
        let inputs = st.inputs.clone();
        let realized = st.buffer.is_some();
        drop(st);
        let passes = n.dtype.is_inexact() && !is_stop(&n, &inputs);
        // An evaluated array is a constant (its expression is gone, as a concrete array is
        // to JAX's `grad`) -- except one evaluated straight from a target, whose gradient
        // would silently vanish: that is an error.
        if passes
            && realized
            && !is_leaf_op(&n.op)
            && !targets.contains(&n.id)
            && n.input_ids().iter().any(|i| targets.contains(i))
        {
            return Err(Error::Unsupported {
                op: "grad",
                msg: format!(
                    "{} ({} of shape {:?}) was computed from an array the gradient is asked \
                     for and evaluated before the gradient was asked for, so the expression \
                     under it is gone: ask with `value_and_grad` before evaluating, or mark \
                     it `stop_gradient()` if it is meant as a constant",
                    n.op.name(),
                    n.dtype,
                    &n.shape[..]
                ),
            });
        }
        stack.push((n, Some(inputs.clone())));
        if passes {
            for i in inputs.iter().rev() {
                if !seen.contains(&i.id) {
                    stack.push((i.clone(), None));
                }
            }
        }
    }
    post.reverse();
    Ok(post)
}

/// Whether `node` (with `inputs`) is a `stop_gradient` marker: a reshape to its input's own
/// shape, which the API builds for nothing else.
fn is_stop(node: &Node, inputs: &[Arc<Node>]) -> bool {
    matches!(node.op, Op::Reshape) && inputs.len() == 1 && inputs[0].shape == node.shape
}

/// Ops whose nodes are leaves by nature (their realized value has no expression under it).
fn is_leaf_op(op: &Op) -> bool {
    matches!(op, Op::Buffer | Op::Const(_) | Op::Iota | Op::Random(..))
}

/// The error for an operation without a gradient rule.
fn no_rule(node: &Node, why: &str) -> Error {
    Error::Unsupported {
        op: "grad",
        msg: format!(
            "no gradient through {} ({} of shape {:?}){why}",
            node.op.name(),
            node.dtype,
            &node.shape[..]
        ),
    }
}

/// The cotangents of `node`'s inputs given its own cotangent `g`. Complex values follow
/// PyTorch's convention (the cotangent of `z = x + iy` is `dL/dx + i dL/dy`): a holomorphic
/// step passes `g * conj(f'(z))`. `needed` holds the nodes whose cotangents are used.
fn rule(
    node: &Arc<Node>,
    inputs: &[Arc<Node>],
    g: Array,
    needed: &HashSet<u64>,
) -> Result<Vec<(Arc<Node>, Array)>> {
    use BinaryOp as B;
    use UnaryOp as U;
    let arr = |n: &Arc<Node>| Array::from_node(n.clone());
    let out = || Array::from_node(node.clone());
    let floating = |n: &Arc<Node>| n.dtype.is_inexact();
    let mut v = Vec::new();
    match &node.op {
        Op::Buffer | Op::Const(_) | Op::Iota | Op::Random(..) | Op::RandomKeyed(_) => {}
        Op::Reshape => v.push((inputs[0].clone(), g.reshape_to(inputs[0].shape.clone()))),
        Op::Permute(p) => {
            let mut inv = vec![0usize; p.len()];
            for (k, &a) in p.iter().enumerate() {
                inv[a] = k;
            }
            v.push((inputs[0].clone(), g.permute(&inv)));
        }
        Op::Broadcast => v.push((inputs[0].clone(), unbroadcast(&g, &inputs[0].shape))),
        Op::Slice(sl) => v.push((inputs[0].clone(), unslice(&g, sl, &inputs[0].shape))),
        Op::Pad(widths, _) => {
            // the input sits at `before..before + n` of every axis
            let sl: Vec<(isize, isize)> = widths.iter().map(|&(b, _)| (b as isize, 1)).collect();
            v.push((
                inputs[0].clone(),
                view(Op::Slice(sl.into()), &g, &inputs[0].shape),
            ));
        }
        Op::Roll { axis, shift } => {
            let n = node.shape[*axis];
            let back = Op::Roll {
                axis: *axis,
                shift: (n - shift) % n,
            };
            v.push((inputs[0].clone(), view(back, &g, &node.shape)));
        }
        Op::Concat(axis) => {
            let mut at = 0usize;
            for i in inputs {
                let sl: Vec<(isize, isize)> = (0..node.shape.len())
                    .map(|k| (if k == *axis { at as isize } else { 0 }, 1))
                    .collect();
                at += i.shape[*axis];
                if floating(i) {
                    v.push((i.clone(), view(Op::Slice(sl.into()), &g, &i.shape)));
                }
            }
        }
        Op::Cast => {
            let from = inputs[0].dtype;
            if floating(&inputs[0]) {
                // real -> complex: the real part; complex -> real (NumPy drops the imaginary
                // part): the cotangent as the real part
                let gx = if from.is_complex() || !g.dtype().is_complex() {
                    g.clone()
                } else {
                    g.real()
                };
                v.push((inputs[0].clone(), gx));
            }
        }
        Op::Where => {
            let (c, a, b) = (arr(&inputs[0]), &inputs[1], &inputs[2]);
            if floating(a) {
                v.push((a.clone(), where_(&c, &g, 0.0)));
            }
            if floating(b) {
                v.push((b.clone(), where_(&c, 0.0, &g)));
            }
        }
        Op::Unary(u) => {
            let x = arr(&inputs[0]);
            if !floating(&inputs[0]) {
                return Ok(v);
            }
            let complex_in = inputs[0].dtype.is_complex();
            // holomorphic steps: the derivative f'(x)
            let d = match u {
                U::Neg => None,
                U::Sqrt => Some(1.0f64 / (&out() * 2.0)),
                U::Rsqrt => {
                    let y = out();
                    Some(&(&(&y * &y) * &y) * -0.5)
                }
                U::Exp => Some(out()),
                U::Expm1 => Some(&out() + 1.0),
                U::Log => Some(1.0f64 / &x),
                U::Log1p => Some(1.0f64 / (&x + 1.0)),
                U::Log2 => Some(1.0f64 / (&x * std::f64::consts::LN_2)),
                U::Log10 => Some(1.0f64 / (&x * std::f64::consts::LN_10)),
                U::Sin => Some(x.cos()),
                U::Cos => Some(-x.sin()),
                U::Tan => {
                    let y = out();
                    Some(&(&y * &y) + 1.0)
                }
                U::Asin => Some(1.0f64 / (1.0f64 - (&x * &x)).sqrt()),
                U::Acos => Some(-1.0f64 / (1.0f64 - (&x * &x)).sqrt()),
                U::Atan => Some(1.0f64 / (&(&x * &x) + 1.0)),
                U::Sinh => Some(x.cosh()),
                U::Cosh => Some(x.sinh()),
                U::Tanh => {
                    let y = out();
                    Some(1.0f64 - (&y * &y))
                }
                U::Square => Some(&x * 2.0),
                U::Reciprocal => {
                    let y = out();
                    Some(-(&y * &y))
                }
                _ => None,
            };
            let gx = match (u, d) {
                (_, Some(d)) => &g * &d.conj(),
                (U::Neg, _) => -&g,
                (U::Abs, _) if complex_in => {
                    // d|z| = Re(conj(z) dz) / |z|: the cotangent g z / |z| (0 at 0)
                    let r = out();
                    &where_(&r.eq(0.0), 0.0, &g / &r) * &x
                }
                (U::Abs, _) => &g * &x.sign(),
                (U::Floor | U::Ceil | U::Round | U::Trunc | U::Sign, _) if !complex_in => &g * 0.0,
                (U::Real, _) => g.clone(),
                (U::Imag, _) if complex_in => crate::complex(&(&g * 0.0), &g),
                (U::Imag, _) => &g * 0.0,
                (U::Conj, _) => g.conj(),
                (U::Angle, _) if complex_in => {
                    // angle = atan2(y, x): the cotangent i g / conj(z) (0 at 0)
                    let ig = crate::complex(&(&g * 0.0), &g);
                    let safe = where_(&x.abs().eq(0.0), 1.0, &x);
                    where_(&x.abs().eq(0.0), 0.0, &ig / &safe.conj())
                }
                (U::Angle, _) => &g * 0.0,
                _ => return Err(no_rule(node, "")),
            };
            v.push((inputs[0].clone(), gx));
        }
        Op::Binary(b) => {
            let (xn, yn) = (&inputs[0], &inputs[1]);
            if !node.dtype.is_inexact() {
                return Ok(v); // comparisons and logic: no gradient flows
            }
            let (x, y) = (arr(xn), arr(yn));
            let complex = node.dtype.is_complex();
            let (gx, gy) = match b {
                B::Add => (g.clone(), g.clone()),
                B::Sub => (g.clone(), -&g),
                B::Mul => (&g * &y.conj(), &g * &x.conj()),
                B::Div => (&g / &y.conj(), -(&g * &(&out() / &y).conj())),
                B::Complex if needed.contains(&yn.id) => {
                    // the imaginary part is needed too, so the complex `g` is computed
                    // anyway: its real part is read from it, not rewritten into a real
                    // transform of its own (`Array::real` of an inverse transform)
                    (g.real_part(), g.imag())
                }
                B::Complex => (g.real(), g.imag()),
                B::Maximum | B::Minimum if !complex => {
                    // ties split evenly, as JAX does
                    let wins = if *b == B::Maximum { x.gt(&y) } else { x.lt(&y) };
                    let tie = x.eq(&y);
                    let share = where_(&tie, 0.5, where_(&wins, 1.0, 0.0)).astype(node.dtype);
                    (&g * &share, &g * &(1.0f64 - &share))
                }
                B::Pow => {
                    // holomorphic in both operands: d/dx = y x^(y-1), d/dy = x^y ln x,
                    // the latter taken as 0 where x is 0 (JAX's convention)
                    let z = out();
                    let dx = &y * &x.pow(&(&y - 1.0));
                    let safe = where_(&x.eq(0.0), 1.0, &x);
                    let dy = &z * &safe.log();
                    (&g * &dx.conj(), &g * &dy.conj())
                }
                B::Atan2 => {
                    let r = &(&x * &x) + &(&y * &y);
                    (&(&g * &y) / &r, -(&(&g * &x) / &r))
                }
                B::Hypot => {
                    let z = out();
                    (&(&g * &x) / &z, &(&g * &y) / &z)
                }
                B::Mod if !complex => (g.clone(), -(&g * &x.floor_div(&y))),
                B::FloorDiv if !complex => (&g * 0.0, &g * 0.0),
                _ => return Err(no_rule(node, "")),
            };
            if floating(xn) {
                v.push((xn.clone(), gx));
            }
            if floating(yn) {
                v.push((yn.clone(), gy));
            }
        }
        Op::Reduce(r, layout) if *layout != ReduceLayout::Scan && floating(&inputs[0]) => {
            // input [m, r] -> output [m]
            let xn = &inputs[0];
            let (m, k) = (xn.shape[0], xn.shape[1]);
            let g2 = g.reshape_to([m, 1].into_iter().collect());
            match r {
                ReduceOp::Sum => v.push((xn.clone(), g2.broadcast_to(&[m, k]))),
                ReduceOp::Max | ReduceOp::Min if !xn.dtype.is_complex() => {
                    // ties share the cotangent evenly, as JAX does
                    let x = arr(xn);
                    let y = out().reshape_to([m, 1].into_iter().collect());
                    let hit = x.eq(y.broadcast_to(&[m, k])).astype(xn.dtype);
                    let count = hit.sum_axes(&[1], true);
                    v.push((xn.clone(), &hit * &(&g2 / &count).broadcast_to(&[m, k])));
                }
                ReduceOp::Prod if !xn.dtype.is_complex() => {
                    // exact for inputs without zeros
                    let x = arr(xn);
                    let y = out().reshape_to([m, 1].into_iter().collect());
                    v.push((xn.clone(), &(&g2 * &y).broadcast_to(&[m, k]) / &x));
                }
                _ => return Err(no_rule(node, "")),
            }
        }
        Op::Reduce(r, ReduceLayout::Scan) if floating(&inputs[0]) => {
            // inclusive scans along the last axis of [m, r]: the cotangent of input j
            // gathers the outputs k >= j, a reversed cumulative sum
            let xn = &inputs[0];
            let rev_cumsum = |a: &Array| a.flip(1).cumsum(1).flip(1);
            match r {
                ReduceOp::Sum => v.push((xn.clone(), rev_cumsum(&g))),
                ReduceOp::Prod if !xn.dtype.is_complex() => {
                    // d out_k / d x_j = out_k / x_j for k >= j (exact for inputs without
                    // zeros, as for `prod`)
                    v.push((xn.clone(), &rev_cumsum(&(&g * &out())) / &arr(xn)));
                }
                _ => return Err(no_rule(node, "")),
            }
        }
        Op::MatMul => {
            let (an, bn) = (&inputs[0], &inputs[1]);
            let (a, bm) = (arr(an), arr(bn));
            let (ra, rb) = (an.shape.len(), bn.shape.len());
            let (m, n) = (an.shape[ra - 2], bn.shape[rb - 1]);
            // the node's shape drops the axes that vector operands gained: restore them
            let batch = crate::shape::broadcast_shapes(&an.shape[..ra - 2], &bn.shape[..rb - 2])
                .ok_or_else(|| no_rule(node, ": batch axes do not broadcast"))?;
            let mut full = batch.clone();
            full.push(m);
            full.push(n);
            let g = g.reshape_to(full);
            let ga = g.matmul(&bm.conj().swapaxes(-1, -2));
            let gb = a.conj().swapaxes(-1, -2).matmul(&g);
            v.push((an.clone(), unbroadcast(&ga, &an.shape)));
            v.push((bn.clone(), unbroadcast(&gb, &bn.shape)));
        }
        Op::Fft(spec) => v.push((inputs[0].clone(), fft_adjoint(node, spec, &inputs[0], &g)?)),
        Op::Gather { axis, span } if floating(&inputs[0]) => {
            let gs = gather_adjoint(node, *axis, *span, &inputs[0], &arr(&inputs[1]), &g)?;
            v.push((inputs[0].clone(), gs));
        }
        Op::Gather { .. } => {}
        _ => return Err(no_rule(node, "")),
    }
    Ok(v)
}

/// Most comparisons (indices times the source axis's length, times the other axes) the
/// one-hot form of a gather's cotangent may cost: beyond, a scatter-add step computes it.
const GATHER_ONE_HOT_MAX: u128 = 1 << 22;

/// The cotangent of a gather's source (`take`, `take_along_axis`): every output element
/// adds its cotangent to the source element its index names (a scatter-add; repeated
/// indices accumulate). Small cases are built from array operations as a one-hot sum,
/// which fuses into one reduction kernel with the work around it and sums in a fixed
/// order: `gs[p, j, q] = sum_k where(idx[p, k, q] == j, g[p, k, q], 0)`, costing `k * n`
/// work per `(p, q)` for `k` indices into an axis of length `n`. Beyond
/// [`GATHER_ONE_HOT_MAX`] comparisons an `Op::ScatterAdd` step adds each cotangent once
/// (atomically on CUDA, so a float sum's last bits may vary run to run).
fn gather_adjoint(
    node: &Node,
    axis: usize,
    span: usize,
    src: &Node,
    idx: &Array,
    g: &Array,
) -> Result<Array> {
    let prod = |s: &[usize]| s.iter().product::<usize>();
    let n = src.shape[axis];
    let (pre, post) = (prod(&src.shape[..axis]), prod(&src.shape[axis + 1..]));
    let k = prod(&node.shape[axis..axis + span]);
    let work = pre as u128 * post as u128 * k as u128 * n as u128;
    let shape = |s: [usize; 3]| -> crate::graph::Shape { s.into_iter().collect() };
    if work > GATHER_ONE_HOT_MAX {
        // F32, F64, C64 and C128 add in their own precision, narrower floats in F32
        let dt = g.dtype();
        let wide = match dt {
            DType::F32 | DType::F64 | DType::C64 | DType::C128 => dt,
            _ => DType::F32,
        };
        let g3 = g.astype(wide).reshape_to(shape([pre, k, post]));
        let i3 = idx.astype(DType::I64).reshape_to(shape([pre, k, post]));
        let sums = make(
            Op::ScatterAdd(n),
            wide,
            shape([pre, n, post]),
            &g.device(),
            &[&g3, &i3],
        );
        return Ok(sums
            .reshape_to(src.shape.iter().copied().collect())
            .astype(dt));
    }
    let four: crate::graph::Shape = [pre, k, 1, post].into_iter().collect();
    let g4 = g.reshape_to(four.clone());
    let i4 = idx.reshape_to(four);
    // negative indices count from the end (an out-of-range index fails the forward pass)
    let i4 = where_(&i4.lt(0i64), &i4 + n as i64, &i4);
    let at = Array::iota_on(n, &g.device()).reshape_to([1, 1, n, 1].into_iter().collect());
    let hit = i4.eq(&at);
    let onehot = where_(&hit, &g4, 0.0);
    Ok(onehot
        .sum_axes(&[1], false)
        .reshape_to(src.shape.iter().copied().collect()))
}

/// An unnormalized transform node of `x` along `axes`.
fn fft_node(x: &Array, axes: &[usize], inverse: bool, kind: FftKind, shape: &[usize]) -> Array {
    let out = match kind {
        FftKind::C2R => x.dtype().real(),
        _ => x.dtype().real().to_complex(),
    };
    let spec = FftSpec {
        axes: axes.iter().copied().collect(),
        inverse,
        kind,
        hermitian: false,
        support: None,
    };
    make(
        Op::Fft(Box::new(spec)),
        out,
        shape.iter().copied().collect(),
        &x.device(),
        &[x],
    )
}

/// The cotangent of a transform's input: the adjoint of the unnormalized transform (the
/// transform of the opposite sign), applied to `g`.
fn fft_adjoint(node: &Arc<Node>, spec: &FftSpec, xn: &Arc<Node>, g: &Array) -> Result<Array> {
    let back = !spec.inverse;
    let (last, others) = spec.axes.split_last().expect("a transform has axes");
    match spec.kind {
        FftKind::C2C => Ok(fft_node(g, &spec.axes, back, FftKind::C2C, &node.shape)),
        FftKind::R2C => {
            // y = T_others(R_last(x)): x's cotangent is Re(T_last^H(pad(T_others^H g)))
            let h = if others.is_empty() {
                g.clone()
            } else {
                fft_node(g, others, back, FftKind::C2C, &node.shape)
            };
            let n = xn.shape[*last];
            let mut w = vec![(0usize, 0usize); node.shape.len()];
            w[*last] = (0, n - node.shape[*last]);
            let full = h.pad(&w, 0.0);
            Ok(fft_node(&full, &[*last], back, FftKind::C2C, &xn.shape).real())
        }
        FftKind::C2R => {
            // x = R_last(T_others(y)) with NumPy's irfft: y's cotangent is
            // T_others^H(c * T_last^H(g) on the half spectrum), c = 1 at frequency 0 and at
            // n/2 (even n), else 2 (each such frequency stands for itself and its mirror).
            // The Hermitian-input variant (the real(ifft) rewrite) agrees with this map on
            // the Hermitian half spectra it is ever given, and so has the same cotangent
            // wherever the gradient flows on to the ops that built its input.
            let n = node.shape[*last];
            let half = xn.shape[*last];
            let gc = g.astype(g.dtype().to_complex());
            let t = fft_node(&gc, &[*last], back, FftKind::C2C, &node.shape);
            let sl: Vec<(isize, isize)> = (0..node.shape.len()).map(|_| (0, 1)).collect();
            let mut hs: Vec<usize> = node.shape.to_vec();
            hs[*last] = half;
            let h = view(Op::Slice(sl.into()), &t, &hs);
            let c: Vec<f64> = (0..half)
                .map(|k| if k == 0 || 2 * k == n { 1.0 } else { 2.0 })
                .collect();
            let mut cs = vec![1usize; hs.len()];
            cs[*last] = half;
            let c = Array::from_vec_on(c, &cs, &g.device())?.astype(g.dtype());
            let h = &h * &c;
            Ok(if others.is_empty() {
                h
            } else {
                fft_node(&h, others, back, FftKind::C2C, &xn.shape)
            })
        }
    }
}

/// A view node `op` of `g` with the shape `shape`.
fn view(op: Op, g: &Array, shape: &[usize]) -> Array {
    make(
        op,
        g.dtype(),
        shape.iter().copied().collect(),
        &g.device(),
        &[g],
    )
}

/// The cotangent of a slice's input (of shape `shape`) from the slice's cotangent `g`:
/// `g`'s elements at the positions the slice read, zeros elsewhere. Per axis, a negative
/// step is undone by reversing, a step above 1 by interleaving zeros, and the offset by
/// zero padding.
fn unslice(g: &Array, sl: &[(isize, isize)], shape: &[usize]) -> Array {
    let mut cur = g.clone();
    for (axis, (&(start, step), &n)) in sl.iter().zip(shape).enumerate() {
        let len = cur.shape()[axis];
        if len == 0 {
            return Array::zeros_on(shape, g.dtype(), &g.device());
        }
        let (mut first, mut step) = (start, step);
        if step < 0 {
            // read backwards from `start`: the same positions forwards from the last one
            first = start + (len as isize - 1) * step;
            step = -step;
            let rev: Vec<(isize, isize)> = (0..cur.ndim())
                .map(|k| {
                    if k == axis {
                        (len as isize - 1, -1)
                    } else {
                        (0, 1)
                    }
                })
                .collect();
            cur = view(Op::Slice(rev.into()), &cur, cur.shape());
        }
        let step = step as usize;
        if step > 1 {
            // [.., len, ..] -> [.., len, step] (zeros after each element) -> [.., len * step, ..]
            let mut s1: Vec<usize> = cur.shape().to_vec();
            s1.insert(axis + 1, 1);
            let spread = cur.reshape_to(s1.iter().copied().collect());
            let mut w = vec![(0usize, 0usize); s1.len()];
            w[axis + 1] = (0, step - 1);
            let padded = spread.pad(&w, 0.0);
            let mut s2: Vec<usize> = cur.shape().to_vec();
            s2[axis] = len * step;
            let flat = padded.reshape_to(s2.iter().copied().collect());
            let keep = (len - 1) * step + 1;
            let cut: Vec<(isize, isize)> = (0..flat.ndim()).map(|_| (0, 1)).collect();
            let mut s3 = s2.clone();
            s3[axis] = keep;
            cur = view(Op::Slice(cut.into()), &flat, &s3);
        }
        let span = cur.shape()[axis];
        let before = first as usize;
        let mut w = vec![(0usize, 0usize); cur.ndim()];
        w[axis] = (before, n - before - span);
        cur = cur.pad(&w, 0.0);
    }
    cur
}

/// `g` summed over the axes that broadcasting to `g`'s shape added or stretched, back to
/// `shape`.
fn unbroadcast(g: &Array, shape: &[usize]) -> Array {
    if g.shape() == shape {
        return g.clone();
    }
    let lead = g.ndim() - shape.len();
    let mut axes: Vec<isize> = (0..lead as isize).collect();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 && g.shape()[lead + i] != 1 {
            axes.push((lead + i) as isize);
        }
    }
    let s = if axes.is_empty() {
        g.clone()
    } else {
        g.sum_axes(&axes, false)
    };
    s.reshape_to(shape.iter().copied().collect())
}
