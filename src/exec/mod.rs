//! Execution: binds a plan template to one evaluation's nodes and runs its steps (fused
//! kernels, library calls, copies, in-place reuse), each through one profiling hook;
//! repeated plans on CUDA replay a captured graph (`replay`). `schedule` only decides.

pub(crate) mod inplace;
#[cfg(feature = "cuda")]
pub(crate) mod replay;

use crate::graph::{Node, Op, Shape};
use crate::runtime::matmul::GemmSpec;
use crate::runtime::{self, Buffer};
use crate::schedule::{self, ParamSrc, TStep, Template};
use crate::{config, nvtx, profile, Device, Error, Result};
use lazyfuse_codegen::{DType, Kernel, LaunchArgs, Scalar};
use smallvec::SmallVec;
use std::fmt;
use std::sync::Arc;

/// What a DAG position of the traced plan becomes at each call.
pub(crate) enum PosSlot {
    /// The call's input `i`.
    Input(usize),
    /// A node the trace captured (an evaluated array, a constant), kept by the function.
    Keep(Arc<Node>),
    /// A node the plan computes: a new node per call.
    Fresh(Op, DType, Shape),
    /// Not referenced by the plan's steps.
    Unused,
}

/// Where a result of a call comes from.
pub(crate) enum Res {
    Pos(usize),
    Input(usize),
    Keep(Arc<Node>),
}

/// The nodes a bound step reads or writes (inline for small kernels).
pub(crate) type NodeList = SmallVec<[Arc<Node>; 4]>;

/// One unit of work, bound to nodes. Kernel steps, by far the most common, keep their
/// nodes and arguments inline (no allocation per bound step), hence the size difference.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Step {
    /// A fused kernel: reads `inputs`' buffers, computes `outputs`.
    Kernel {
        kernel: Arc<Kernel>,
        inputs: NodeList,
        outputs: NodeList,
        args: LaunchArgs,
        /// The plan's note of values this kernel recomputes rather than reads stored.
        recomputes: Option<Arc<schedule::Recomputes>>,
    },
    /// Copy of `src`'s buffer to `dst`'s device.
    Copy { src: Arc<Node>, dst: Arc<Node> },
    /// The FFT `dst` of `src`'s buffer (a cuFFT / rustfft call).
    Fft { src: Arc<Node>, dst: Arc<Node> },
    /// A transform whose input is computed inside its first pass (and, with an
    /// epilogue, whose consumer is computed inside its last): generated passes on CUDA.
    FftFused(Box<FusedFft>),
    /// `dst`, a reshape of `src`, takes `src`'s buffer (C order is unchanged).
    Alias { src: Arc<Node>, dst: Arc<Node> },
    /// The product `dst` read from `a`'s and `b`'s buffers as `spec` lays them out (a
    /// cuBLAS / ndarray call).
    MatMul {
        a: Arc<Node>,
        b: Arc<Node>,
        dst: Arc<Node>,
        spec: Arc<GemmSpec>,
    },
    /// `dst` (an `Op::ScatterAdd` node) from `values`' and `indices`' buffers (an atomic
    /// kernel on CUDA, a loop on the CPU: `runtime::scatter`).
    Scatter {
        values: Arc<Node>,
        indices: Arc<Node>,
        dst: Arc<Node>,
    },
}

/// A bound `TStep::FftFused`.
pub(crate) struct FusedFft {
    /// The prologue: computes the transform's input at each linear index.
    pub(crate) kernel: Arc<Kernel>,
    pub(crate) inputs: NodeList,
    /// The prologue's launch arguments (launch shape: the transform's input shape).
    pub(crate) args: LaunchArgs,
    pub(crate) spec: Arc<crate::graph::FftSpec>,
    /// The node the step computes: the (last) transform, or the epilogue's output. (The
    /// transform's input node is not bound: a traced function's call has none.)
    pub(crate) dst: Arc<Node>,
    /// The kernel between two transforms of a round trip and the second transform, for
    /// each round trip of a chain (in order; empty without one).
    pub(crate) round: Vec<BoundRound>,
    pub(crate) epilogue: Option<BoundEpi>,
}

/// A bound `schedule::RoundPlan`.
pub(crate) struct BoundRound {
    pub(crate) kernel: Arc<Kernel>,
    /// Its inputs; the one at `value_input` is the first transform (not read).
    pub(crate) inputs: NodeList,
    pub(crate) value_input: u32,
    pub(crate) args: LaunchArgs,
    pub(crate) spec: Arc<crate::graph::FftSpec>,
}

/// A bound `schedule::EpiPlan`.
pub(crate) struct BoundEpi {
    pub(crate) kernel: Arc<Kernel>,
    /// Its inputs; the one at `value_input` is the transform (not read).
    pub(crate) inputs: NodeList,
    pub(crate) value_input: u32,
    pub(crate) shift_param: u32,
    pub(crate) args: LaunchArgs,
}

/// The plan of one evaluation.
pub(crate) struct Schedule {
    pub(crate) steps: SmallVec<[Step; 1]>,
    /// In-place opportunities bound to this evaluation's nodes.
    reuse: SmallVec<[inplace::Bound; 1]>,
    /// For display only: per step, the recomputed values named by node (`#id op`), where
    /// the schedule was bound with [`Schedule::name_recomputed`].
    recomputed: Vec<(usize, String)>,
    /// Per step: nodes whose buffers go back to the pool once the step has run (empty
    /// unless bound with [`Schedule::with_release`]).
    release: Vec<SmallVec<[Arc<Node>; 2]>>,
}

impl Schedule {
    /// This schedule releasing, after each step `i`, the buffers of the nodes at the
    /// positions `per_step[i]` (a traced call's intermediates nothing reads later), so that
    /// a long body holds about one step's intermediates at a time instead of all of them.
    /// A node whose buffer someone else shares keeps it (`graph::consume_buffer`). An empty
    /// `per_step` releases nothing (and costs nothing).
    pub(crate) fn with_release(
        mut self,
        per_step: &[SmallVec<[usize; 2]>],
        nodes: &[Arc<Node>],
    ) -> Schedule {
        if !per_step.is_empty() && per_step.len() == self.steps.len() {
            self.release = per_step
                .iter()
                .map(|ps| ps.iter().map(|&p| nodes[p].clone()).collect())
                .collect();
        }
        self
    }

    /// The schedule of one call of a traced function over `nodes`: in place only into
    /// the call's inputs (`is_input` of a position), see [`inplace::bind_inputs`]. The
    /// template's other candidates are dropped: the call binds fresh nodes without the
    /// template's edges, so reference counts cannot prove ownership of anything else.
    pub(crate) fn with_input_reuse(
        mut self,
        t: &Template,
        nodes: &[Arc<Node>],
        is_input: impl Fn(usize) -> bool,
    ) -> Schedule {
        self.reuse = inplace::bind_inputs(t.reuse(), nodes, is_input);
        self
    }
    /// Names, for display, the values each kernel step recomputes by their nodes in
    /// `nodes` (the DAG positions the schedule was bound over).
    fn name_recomputed(mut self, nodes: &[Arc<Node>]) -> Schedule {
        self.recomputed = self
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Step::Kernel {
                    recomputes: Some(r),
                    ..
                } => {
                    let names: Vec<String> =
                        r.at.iter()
                            .map(|&p| format!("#{} {}", nodes[p].id, nodes[p].op.name()))
                            .collect();
                    Some((i, names.join(", ")))
                }
                _ => None,
            })
            .collect();
        self
    }
    /// Number of kernel steps.
    pub(crate) fn kernel_count(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s, Step::Kernel { .. }))
            .count()
    }
    /// Number of library steps (FFTs, matmuls).
    pub(crate) fn library_count(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| {
                matches!(
                    s,
                    Step::Fft { .. }
                        | Step::FftFused(_)
                        | Step::MatMul { .. }
                        | Step::Scatter { .. }
                )
            })
            .count()
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "schedule: {} steps", self.steps.len())?;
        for (i, s) in self.steps.iter().enumerate() {
            match s {
                Step::Kernel {
                    kernel,
                    inputs,
                    outputs,
                    args,
                    recomputes,
                } => {
                    writeln!(
                        f,
                        "step {i}: kernel shape={:?} inputs={inputs:?} outputs={outputs:?} params={:?}",
                        args.shape, args.params
                    )?;
                    if let Some(r) = recomputes {
                        match self.recomputed.iter().find(|(s, _)| *s == i) {
                            Some((_, named)) => writeln!(f, "  recomputes {named}")?,
                            None => writeln!(f, "  recomputes {}", r.ops)?,
                        }
                    }
                    for line in kernel.to_string().lines() {
                        writeln!(f, "    {line}")?;
                    }
                }
                Step::Copy { src, dst } => writeln!(f, "step {i}: copy {src:?} -> {dst:?}")?,
                Step::Fft { src, dst } => writeln!(f, "step {i}: fft {src:?} -> {dst:?}")?,
                Step::FftFused(ff) => {
                    let FusedFft {
                        kernel,
                        inputs,
                        args,
                        spec,
                        dst,
                        round,
                        epilogue,
                    } = &**ff;
                    let back: String = round
                        .iter()
                        .map(|r| format!(", back by {}", r.spec.label()))
                        .collect();
                    writeln!(
                        f,
                        "step {i}: {}{back} -> {dst:?}, its input computed in the first pass: \
                         fused prologue shape={:?} inputs={inputs:?} params={:?}",
                        spec.label(),
                        args.shape,
                        args.params
                    )?;
                    for line in kernel.to_string().lines() {
                        writeln!(f, "    {line}")?;
                    }
                    for r in round {
                        writeln!(
                            f,
                            "  its consumer and the transform back in the same passes (one pass \
                             goes there and back): fused middle work inputs={:?} (transform at \
                             {}) params={:?}",
                            r.inputs, r.value_input, r.args.params
                        )?;
                        for line in r.kernel.to_string().lines() {
                            writeln!(f, "    {line}")?;
                        }
                    }
                    if let Some(e) = epilogue {
                        writeln!(
                            f,
                            "  and its consumer in the last pass: fused epilogue inputs={:?} \
                             (transform at {}) params={:?}",
                            e.inputs, e.value_input, e.args.params
                        )?;
                        for line in e.kernel.to_string().lines() {
                            writeln!(f, "    {line}")?;
                        }
                    }
                }
                Step::Alias { src, dst } => writeln!(f, "step {i}: alias {src:?} -> {dst:?}")?,
                Step::MatMul { a, b, dst, spec } => {
                    writeln!(f, "step {i}: matmul {a:?} @ {b:?} -> {dst:?}: {spec}")?
                }
                Step::Scatter {
                    values,
                    indices,
                    dst,
                } => writeln!(
                    f,
                    "step {i}: scatter-add {values:?} at {indices:?} -> {dst:?}"
                )?,
            }
        }
        Ok(())
    }
}

/// Plans the evaluation of `roots`: a cached plan of the same structure when there is one.
pub(crate) fn plan(roots: &[Arc<Node>]) -> Result<Schedule> {
    let probe = crate::profile::begin_wall();
    let _range = nvtx::range(c"lazyfuse.plan");
    let (template, nodes, hit) = schedule::template_for_hit(roots)?;
    let sched = bind(&template, &nodes)?.name_recomputed(&nodes);
    crate::profile::plan_done(probe, hit, sched.steps.len());
    config::debug_log!(3, "{sched}");
    Ok(sched)
}

/// The template's steps with this DAG's nodes and values.
pub(crate) fn bind(t: &Template, nodes: &[Arc<Node>]) -> Result<Schedule> {
    let value = |p: usize| -> Result<Scalar> {
        match nodes[p].op {
            Op::Const(s) => Ok(s),
            Op::Random(_, seed) => Ok(Scalar::I64(seed as i64)),
            _ => Err(Error::internal(
                "bind",
                "parameter source is not a constant",
            )),
        }
    };
    let params_of = |ps: &[ParamSrc]| -> Result<_> {
        ps.iter()
            .map(|p| match p {
                ParamSrc::Fixed(v) => Ok(*v),
                ParamSrc::Node(i) => value(*i),
            })
            .collect::<Result<_>>()
    };
    let steps = t
        .steps()
        .iter()
        .map(|s| {
            Ok(match s {
                TStep::Kernel {
                    kernel,
                    inputs,
                    outputs,
                    shape,
                    params,
                    recomputes,
                } => Step::Kernel {
                    kernel: kernel.clone(),
                    inputs: inputs.iter().map(|&p| nodes[p].clone()).collect(),
                    outputs: outputs.iter().map(|&p| nodes[p].clone()).collect(),
                    args: LaunchArgs {
                        shape: shape.clone(),
                        params: params_of(params)?,
                    },
                    recomputes: recomputes.clone(),
                },
                TStep::Copy { src, dst } => Step::Copy {
                    src: nodes[*src].clone(),
                    dst: nodes[*dst].clone(),
                },
                TStep::Fft { src, dst } => Step::Fft {
                    src: nodes[*src].clone(),
                    dst: nodes[*dst].clone(),
                },
                TStep::FftFused {
                    kernel,
                    inputs,
                    shape,
                    params,
                    spec,
                    dst,
                    round,
                    epilogue,
                } => {
                    // the step computes the epilogue's output, else the last transform
                    let last = round.last().map_or(*dst, |r| r.dst);
                    let dst = epilogue.as_ref().map_or(last, |e| e.out);
                    // each middle kernel runs over the output of the transform before it: the
                    // half spectrum after a real round trip's R2C transform, else the input's
                    // shape (C2C chains). Derived, not read from the nodes: the transforms
                    // inside a fused step are positions no step writes, which a traced plan
                    // binds to a shapeless stand-in.
                    let mut first_out = shape.clone();
                    if spec.kind == crate::graph::FftKind::R2C {
                        if let Some(l) = first_out.last_mut() {
                            *l = *l / 2 + 1;
                        }
                    }
                    let round = round
                        .iter()
                        .enumerate()
                        .map(|(j, r)| {
                            Ok(BoundRound {
                                kernel: r.kernel.clone(),
                                inputs: r.inputs.iter().map(|&p| nodes[p].clone()).collect(),
                                value_input: r.value_input,
                                args: LaunchArgs {
                                    shape: if j == 0 {
                                        first_out.clone()
                                    } else {
                                        shape.clone()
                                    },
                                    params: params_of(&r.params)?,
                                },
                                spec: r.spec.clone(),
                            })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    // the epilogue runs over the transform's output (a real transform's
                    // other end has another shape than its input), the shape of its own
                    // output, the step's result
                    let epilogue = match epilogue {
                        Some(e) => Some(BoundEpi {
                            kernel: e.kernel.clone(),
                            inputs: e.inputs.iter().map(|&p| nodes[p].clone()).collect(),
                            value_input: e.value_input,
                            shift_param: e.shift_param,
                            args: LaunchArgs {
                                shape: nodes[e.out].shape.iter().copied().collect(),
                                params: params_of(&e.params)?,
                            },
                        }),
                        None => None,
                    };
                    Step::FftFused(Box::new(FusedFft {
                        kernel: kernel.clone(),
                        inputs: inputs.iter().map(|&p| nodes[p].clone()).collect(),
                        args: LaunchArgs {
                            shape: shape.clone(),
                            params: params_of(params)?,
                        },
                        spec: spec.clone(),
                        dst: nodes[dst].clone(),
                        round,
                        epilogue,
                    }))
                }
                TStep::Alias { src, dst } => Step::Alias {
                    src: nodes[*src].clone(),
                    dst: nodes[*dst].clone(),
                },
                TStep::MatMul { a, b, dst, spec } => Step::MatMul {
                    a: nodes[*a].clone(),
                    b: nodes[*b].clone(),
                    dst: nodes[*dst].clone(),
                    spec: spec.clone(),
                },
                TStep::Scatter {
                    values,
                    indices,
                    dst,
                } => Step::Scatter {
                    values: nodes[*values].clone(),
                    indices: nodes[*indices].clone(),
                    dst: nodes[*dst].clone(),
                },
            })
        })
        .collect::<Result<_>>()?;
    Ok(Schedule {
        steps,
        reuse: inplace::bind(t.reuse(), nodes),
        recomputed: Vec::new(),
        release: Vec::new(),
    })
}

/// Plans and runs the evaluation of `roots`.
pub(crate) fn evaluate(roots: &[Arc<Node>]) -> Result<()> {
    if roots.iter().all(|r| r.buffer().is_some()) {
        return Ok(());
    }
    let _scope = crate::profile::scope(true);
    let _eval = nvtx::range(c"lazyfuse.eval");
    #[cfg(feature = "cuda")]
    let _evaluating = replay::Evaluating::enter(roots);
    let probe = crate::profile::begin_wall();
    let planning = nvtx::range(c"lazyfuse.plan");
    let (template, nodes, hit) = schedule::template_for_hit(roots)?;
    if !hit {
        nvtx::mark(c"lazyfuse.plan cache miss");
    }
    drop(planning);
    crate::stats::bump::evals(1);
    // a profiled eval runs step by step so that each step is timed
    #[cfg(feature = "cuda")]
    if !crate::profile::recording() && replay::eval_graph(&template, &nodes, roots)? {
        return Ok(());
    }
    let mut sched = bind(&template, &nodes)?;
    if config::debug_level() >= 3 {
        sched = sched.name_recomputed(&nodes);
    }
    drop(nodes); // the schedule holds what it needs; fewer handles, more in-place reuse
    crate::profile::plan_done(probe, hit, sched.steps.len());
    config::debug_log!(3, "{sched}");
    let in_place = execute(&sched)?;
    template.note_plain_run(in_place);
    Ok(())
}

/// Bytes held by `bufs` together (what a step reads from them, each read once).
fn bytes_of(bufs: &[&Buffer]) -> u64 {
    bufs.iter()
        .map(|b| (b.len() * b.dtype().size()) as u64)
        .sum()
}

fn buffer_of(n: &Node) -> Result<Arc<Buffer>> {
    n.buffer()
        .ok_or_else(|| Error::internal("execute", format!("input {n:?} not materialized")))
}

/// The buffers of a fused kernel's inputs (`None` at its value input, a transform the
/// step computes).
fn but_value(inputs: &NodeList, value_input: u32) -> Result<SmallVec<[Option<Arc<Buffer>>; 4]>> {
    inputs
        .iter()
        .enumerate()
        .map(|(k, n)| match k as u32 == value_input {
            true => Ok(None),
            false => buffer_of(n).map(Some),
        })
        .collect()
}

/// Runs a schedule step by step, realizing each step's outputs; whether a step wrote in
/// place.
pub(crate) fn execute(sched: &Schedule) -> Result<bool> {
    let mut in_place = false;
    for (si, step) in sched.steps.iter().enumerate() {
        if let Some(dead) = si.checked_sub(1).and_then(|i| sched.release.get(i)) {
            for n in dead {
                // nothing can obtain the node by hash-consing once it is consumed
                drop(crate::graph::consume_buffer(n, &[], || true));
            }
        }
        match step {
            Step::Kernel {
                kernel,
                inputs,
                outputs,
                args,
                recomputes,
            } => {
                let note = recomputes.as_ref().map(|r| r.ops.as_str());
                if inplace::try_run(sched, si, kernel, inputs, outputs, args, note)? {
                    in_place = true;
                    continue;
                }
                let bufs: SmallVec<[Arc<Buffer>; 4]> =
                    inputs.iter().map(|n| buffer_of(n)).collect::<Result<_>>()?;
                let refs: SmallVec<[&Buffer; 4]> = bufs.iter().map(|b| b.as_ref()).collect();
                let dev: &Device = &outputs[0].device;
                let probe = profile::begin(dev);
                let outs = runtime::run_kernel(dev, kernel, &refs, args)?;
                profile::kernel_done(probe, dev, kernel, &refs, &args.shape, note);
                for (node, buf) in outputs.iter().zip(outs) {
                    node.realize(Arc::new(buf));
                }
            }
            Step::Fft { src, dst } => {
                let Op::Fft(spec) = &dst.op else {
                    return Err(Error::internal("execute", "fft step on a non-fft node"));
                };
                let b = buffer_of(src)?;
                crate::stats::bump::library_calls(1);
                let probe = profile::begin(&dst.device);
                let range = nvtx::range_with(|| format!("lazyfuse.{}", spec.label()));
                let out = runtime::fft(&dst.device, spec, &b, &src.shape, &dst.shape)?;
                drop(range);
                if probe.is_some() {
                    let bytes = bytes_of(&[&b]) + bytes_of(&[&out]);
                    let detail = format!("{:?} {:?} -> {:?}", spec.kind, src.shape, dst.shape);
                    profile::library_done(probe, &dst.device, spec.label(), detail, bytes);
                }
                dst.realize(Arc::new(out));
            }
            Step::FftFused(ff) => {
                let FusedFft {
                    kernel,
                    inputs,
                    args,
                    spec,
                    dst,
                    round,
                    epilogue,
                } = &**ff;
                let bufs: SmallVec<[Arc<Buffer>; 4]> =
                    inputs.iter().map(|n| buffer_of(n)).collect::<Result<_>>()?;
                let refs: SmallVec<[&Buffer; 4]> = bufs.iter().map(|b| b.as_ref()).collect();
                // the middle kernel's and the epilogue's inputs but the transforms
                let epi_bufs = match epilogue {
                    Some(e) => but_value(&e.inputs, e.value_input)?,
                    None => SmallVec::new(),
                };
                let epi_refs: SmallVec<[Option<&Buffer>; 4]> =
                    epi_bufs.iter().map(|b| b.as_deref()).collect();
                let mid_bufs = round
                    .iter()
                    .map(|r| but_value(&r.inputs, r.value_input))
                    .collect::<Result<Vec<_>>>()?;
                let mid_refs: Vec<SmallVec<[Option<&Buffer>; 4]>> = mid_bufs
                    .iter()
                    .map(|m| m.iter().map(|b| b.as_deref()).collect())
                    .collect();
                let mids: Vec<runtime::RoundRun> = round
                    .iter()
                    .zip(&mid_refs)
                    .map(|(r, ins)| runtime::RoundRun {
                        kernel: &r.kernel,
                        inputs: ins,
                        value_input: r.value_input,
                        args: &r.args,
                        spec: &r.spec,
                    })
                    .collect();
                let epi = epilogue.as_ref().map(|e| runtime::EpiRun {
                    kernel: &e.kernel,
                    inputs: &epi_refs,
                    value_input: e.value_input,
                    shift_param: e.shift_param,
                    args: &e.args,
                });
                crate::stats::bump::library_calls(1);
                let probe = profile::begin(&dst.device);
                let range = nvtx::range_with(|| format!("lazyfuse.{} fused", spec.label()));
                // the transform's input is the prologue's launch shape, its output the last
                // transform's node (the epilogue's output, where there is one, has it too)
                let out = runtime::fft_fused(
                    &dst.device,
                    spec,
                    kernel,
                    &refs,
                    args,
                    &args.shape,
                    &dst.shape,
                    &mids,
                    epi.as_ref(),
                )?;
                drop(range);
                if probe.is_some() {
                    let bytes = bytes_of(&refs) + bytes_of(&[&out]);
                    let detail = format!("fused {:?} {:?}", spec.kind, args.shape);
                    profile::library_done(probe, &dst.device, spec.label(), detail, bytes);
                }
                dst.realize(Arc::new(out));
            }
            Step::Alias { src, dst } => dst.realize(buffer_of(src)?),
            Step::MatMul { a, b, dst, spec } => {
                let (x, y) = (buffer_of(a)?, buffer_of(b)?);
                crate::stats::bump::library_calls(1);
                let probe = profile::begin(&dst.device);
                let range = nvtx::range(c"lazyfuse.matmul");
                let out = runtime::matmul::run(&dst.device, spec, &x, &y)?;
                drop(range);
                if probe.is_some() {
                    let bytes = bytes_of(&[&x, &y]) + bytes_of(&[&out]);
                    let detail = format!("{:?} @ {:?} -> {:?}", a.shape, b.shape, dst.shape);
                    profile::library_done(probe, &dst.device, "matmul".into(), detail, bytes);
                }
                dst.realize(Arc::new(out));
            }
            Step::Scatter {
                values,
                indices,
                dst,
            } => {
                let (v, ix) = (buffer_of(values)?, buffer_of(indices)?);
                crate::stats::bump::library_calls(1);
                let probe = profile::begin(&dst.device);
                let range = nvtx::range(c"lazyfuse.scatter_add");
                let out = runtime::scatter::run(&dst.device, &values.shape, &dst.shape, &v, &ix)?;
                drop(range);
                if probe.is_some() {
                    let bytes = bytes_of(&[&v, &ix]) + bytes_of(&[&out]);
                    let detail = format!("{:?} -> {:?}", values.shape, dst.shape);
                    profile::library_done(probe, &dst.device, "scatter_add".into(), detail, bytes);
                }
                dst.realize(Arc::new(out));
            }
            Step::Copy { src, dst } => {
                let b = buffer_of(src)?;
                let probe = profile::begin_wall();
                let range = nvtx::range(c"lazyfuse.to_device");
                let (out, peer) = runtime::copy_to(&b, &dst.device)?;
                drop(range);
                // a peer copy moves the bytes once; through the host, down and up
                let bytes = if peer { 1 } else { 2 } * bytes_of(&[&out]);
                let detail = format!("{} -> {}", src.device, dst.device);
                profile::host_done(
                    probe,
                    profile::EntryKind::DeviceCopy,
                    "to_device",
                    detail,
                    bytes,
                );
                dst.realize(Arc::new(out));
            }
        }
    }
    Ok(in_place)
}
