//! `format!("{a}")`: an array's values written the way NumPy's `str(a)` writes them (nested
//! brackets, aligned columns, `...` summaries, NumPy's float rules), reading back only the
//! elements that are printed; and `set_printoptions`.

pub use crate::config::PrintOptions;
use crate::{c32, c64, Array, DType, Result};
use std::fmt::{self, Write as _};

/// Sets how arrays print from now on, for every thread (NumPy's `np.set_printoptions`).
pub fn set_printoptions(options: PrintOptions) {
    *crate::config::CONFIG
        .print
        .write()
        .unwrap_or_else(|e| e.into_inner()) = Some(options);
}

/// The current print options.
pub fn printoptions() -> PrintOptions {
    crate::config::CONFIG
        .print
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .unwrap_or_default()
}

/// The printed elements, in C order over the summarized shape.
/// The precision of printed floats: the shortest digits that identify a value depend on it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Prec {
    Half,
    BHalf,
    Single,
    Double,
}

impl Prec {
    /// `v` rounded to this precision.
    fn round(self, v: f64) -> f64 {
        match self {
            Prec::Half => crate::f16::from_f64(v).to_f64(),
            Prec::BHalf => crate::bf16::from_f64(v).to_f64(),
            Prec::Single => v as f32 as f64,
            Prec::Double => v,
        }
    }
}

enum Values {
    Bool(Vec<bool>),
    Int(Vec<i128>),
    /// Values (exact in f64) and the precision their shortest digits are taken in.
    Float(Vec<f64>, Prec),
    Complex(Vec<(f64, f64)>, Prec),
}

fn ints<T: crate::Element + Into<i128>>(a: &Array) -> Result<Values> {
    Ok(Values::Int(
        a.to_vec::<T>()?.into_iter().map(Into::into).collect(),
    ))
}

fn read(a: &Array) -> Result<Values> {
    Ok(match a.dtype() {
        DType::Bool => Values::Bool(a.to_vec::<bool>()?),
        DType::I8 => ints::<i8>(a)?,
        DType::I16 => ints::<i16>(a)?,
        DType::I32 => ints::<i32>(a)?,
        DType::I64 => ints::<i64>(a)?,
        DType::U8 => ints::<u8>(a)?,
        DType::U16 => ints::<u16>(a)?,
        DType::U32 => ints::<u32>(a)?,
        DType::U64 => ints::<u64>(a)?,
        DType::F16 => Values::Float(
            a.to_vec::<crate::f16>()?
                .into_iter()
                .map(|v| v.to_f64())
                .collect(),
            Prec::Half,
        ),
        DType::BF16 => Values::Float(
            a.to_vec::<crate::bf16>()?
                .into_iter()
                .map(|v| v.to_f64())
                .collect(),
            Prec::BHalf,
        ),
        DType::F32 => Values::Float(
            a.to_vec::<f32>()?.into_iter().map(f64::from).collect(),
            Prec::Single,
        ),
        DType::F64 => Values::Float(a.to_vec::<f64>()?, Prec::Double),
        DType::C64 => Values::Complex(
            a.to_vec::<c32>()?
                .into_iter()
                .map(|z| (f64::from(z.re), f64::from(z.im)))
                .collect(),
            Prec::Single,
        ),
        DType::C128 => Values::Complex(
            a.to_vec::<c64>()?
                .into_iter()
                .map(|z| (z.re, z.im))
                .collect(),
            Prec::Double,
        ),
    })
}

// --- float digits ---

/// The shortest digits that identify `x` in its precision, positional (`"-12.5"`, `"3"`).
fn shortest(x: f64, p: Prec) -> String {
    match p {
        Prec::Single => format!("{}", x as f32),
        Prec::Double => format!("{x}"),
        Prec::Half | Prec::BHalf => {
            let (m, e) = shortest_sci(x, p);
            positional_of(&m, e)
        }
    }
}

/// The positional form of the scientific digits `m` (`"-1.25"`) times `10^e`.
fn positional_of(m: &str, e: i32) -> String {
    let (neg, m) = match m.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, m),
    };
    let digits: String = m.chars().filter(|c| *c != '.').collect();
    let point = e + 1; // digits before the point
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if point <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-point) as usize));
        out.push_str(&digits);
    } else if point as usize >= digits.len() {
        out.push_str(&digits);
        out.push_str(&"0".repeat(point as usize - digits.len()));
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
    out
}

/// The shortest scientific digits of `x`: mantissa (`"1.5"`) and exponent.
fn shortest_sci(x: f64, p: Prec) -> (String, i32) {
    match p {
        Prec::Single => split_exp(&format!("{:e}", x as f32)),
        Prec::Double => split_exp(&format!("{x:e}")),
        Prec::Half | Prec::BHalf => {
            // the fewest significant digits that round back to the same 16-bit value
            for d in 1..17 {
                let s = format!("{:.*e}", d - 1, x);
                let back: f64 = s.parse().unwrap_or(f64::NAN);
                if p.round(back) == x {
                    let (m, e) = split_exp(&s);
                    let m = match m.split_once('.') {
                        Some((i, f)) => {
                            let f = f.trim_end_matches('0');
                            if f.is_empty() {
                                i.to_string()
                            } else {
                                format!("{i}.{f}")
                            }
                        }
                        None => m,
                    };
                    return (m, e);
                }
            }
            split_exp(&format!("{x:e}"))
        }
    }
}

fn split_exp(s: &str) -> (String, i32) {
    match s.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse().unwrap_or(0)),
        None => (s.to_string(), 0),
    }
}

fn split_point(s: &str) -> (String, String) {
    match s.split_once('.') {
        Some((i, f)) => (i.to_string(), f.to_string()),
        None => (s.to_string(), String::new()),
    }
}

fn trim_zeros(f: &mut String) {
    while f.ends_with('0') {
        f.pop();
    }
}

/// Positional digits: unique, cut at `precision` fractional digits, trailing zeros trimmed
/// (NumPy's `dragon4_positional(unique=True, trim='.')`): integer and fractional parts.
fn positional(x: f64, p: Prec, precision: usize, plus: bool) -> (String, String) {
    let (mut i, mut f) = split_point(&shortest(x, p));
    if f.len() > precision {
        (i, f) = split_point(&format!("{x:.precision$}"));
        trim_zeros(&mut f);
    }
    if plus && !i.starts_with('-') {
        i.insert(0, '+');
    }
    (i, f)
}

/// Scientific digits (NumPy's `dragon4_scientific(unique=True, trim='.')`): integer part,
/// fractional part, exponent.
fn scientific(x: f64, p: Prec, precision: usize, plus: bool) -> (String, String, i32) {
    let (m, mut e) = shortest_sci(x, p);
    let (mut i, mut f) = split_point(&m);
    if f.len() > precision {
        let (m2, e2) = split_exp(&format!("{x:.precision$e}"));
        (i, f) = split_point(&m2);
        e = e2;
        trim_zeros(&mut f);
    }
    if plus && !i.starts_with('-') {
        i.insert(0, '+');
    }
    (i, f, e)
}

fn exp_digits(e: i32) -> usize {
    e.unsigned_abs().to_string().len().max(2)
}

/// NumPy's `FloatingFormat` in its default `maxprec` mode: one layout for all printed
/// values of an array.
struct FloatFmt {
    exp: bool,
    precision: usize,
    /// Fractional digits every value shows (scientific: all equal).
    min_digits: usize,
    pad_left: usize,
    pad_right: usize,
    exp_size: usize,
    plus: bool,
    prec: Prec,
}

impl FloatFmt {
    fn new(values: &[f64], prec: Prec, o: &PrintOptions, plus: bool) -> FloatFmt {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let nonzero = finite.iter().filter(|&&v| v != 0.0).map(|v| v.abs());
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for v in nonzero {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        // NumPy compares in the values' own precision (the constants are weak scalars)
        let exp = hi > 0.0
            && (hi >= prec.round(1e8)
                || (!o.suppress && (lo < prec.round(1e-4) || prec.round(hi / lo) > 1e3)));
        let mut f = FloatFmt {
            exp,
            precision: o.precision,
            min_digits: 0,
            pad_left: 0,
            pad_right: 0,
            exp_size: 0,
            plus,
            prec,
        };
        if !finite.is_empty() {
            if exp {
                let parts: Vec<_> = finite
                    .iter()
                    .map(|&x| scientific(x, prec, o.precision, plus))
                    .collect();
                f.exp_size = parts.iter().map(|p| exp_digits(p.2)).max().unwrap_or(2);
                f.precision = parts.iter().map(|p| p.1.len()).max().unwrap_or(0);
                f.min_digits = f.precision;
                f.pad_left = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
                f.pad_right = f.exp_size + 2 + f.precision;
            } else {
                let parts: Vec<_> = finite
                    .iter()
                    .map(|&x| positional(x, prec, o.precision, plus))
                    .collect();
                f.pad_left = parts.iter().map(|p| p.0.len()).max().unwrap_or(0);
                f.pad_right = parts.iter().map(|p| p.1.len()).max().unwrap_or(0);
            }
        }
        if finite.len() != values.len() {
            let neginf = plus || values.contains(&f64::NEG_INFINITY);
            let offset = f.pad_right as isize + 1;
            f.pad_left = (f.pad_left as isize)
                .max(3 - offset)
                .max(3 + neginf as isize - offset) as usize;
        }
        f
    }

    fn format(&self, x: f64) -> String {
        if !x.is_finite() {
            let s = if x.is_nan() {
                if self.plus { "+nan" } else { "nan" }.to_string()
            } else if x < 0.0 {
                "-inf".to_string()
            } else if self.plus {
                "+inf".to_string()
            } else {
                "inf".to_string()
            };
            return format!("{s:>w$}", w = self.pad_left + self.pad_right + 1);
        }
        if self.exp {
            let (i, mut f, e) = scientific(x, self.prec, self.precision, self.plus);
            while f.len() < self.min_digits {
                f.push('0');
            }
            let sign = if e < 0 { '-' } else { '+' };
            format!(
                "{i:>pl$}.{f}e{sign}{:0>es$}",
                e.unsigned_abs(),
                pl = self.pad_left,
                es = self.exp_size
            )
        } else {
            let (i, f) = positional(x, self.prec, self.precision, self.plus);
            format!("{i:>pl$}.{f:<pr$}", pl = self.pad_left, pr = self.pad_right)
        }
    }
}

/// Every printed element as its string, all of one width class.
fn strings(values: &Values, o: &PrintOptions) -> Vec<String> {
    match values {
        Values::Bool(v) => v
            .iter()
            .map(|&b| if b { " True" } else { "False" }.to_string())
            .collect(),
        Values::Int(v) => {
            let w = v.iter().map(|x| x.to_string().len()).max().unwrap_or(0);
            v.iter().map(|x| format!("{x:>w$}")).collect()
        }
        Values::Float(v, p) => {
            let f = FloatFmt::new(v, *p, o, false);
            v.iter().map(|&x| f.format(x)).collect()
        }
        Values::Complex(v, p) => {
            let re: Vec<f64> = v.iter().map(|z| z.0).collect();
            let im: Vec<f64> = v.iter().map(|z| z.1).collect();
            let (fr, fi) = (
                FloatFmt::new(&re, *p, o, false),
                FloatFmt::new(&im, *p, o, true),
            );
            v.iter()
                .map(|&(r, i)| {
                    let r = fr.format(r);
                    let mut i = fi.format(i);
                    // the `j` goes before the padding of the imaginary part
                    let sp = i.trim_end().len();
                    i.insert(sp, 'j');
                    r + &i
                })
                .collect()
        }
    }
}

// --- 0-d arrays: Python's scalar repr ---

/// Python's `repr(float)`: shortest digits, scientific below 1e-4 and from 1e16 on;
/// `point` adds `.0` to integral values (as for floats, not inside complex numbers).
fn float_repr(x: f64, p: Prec, point: bool) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    let a = x.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        let (m, e) = shortest_sci(x, p);
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", e.unsigned_abs());
    }
    let s = shortest(x, p);
    if point && !s.contains('.') {
        s + ".0"
    } else {
        s
    }
}

fn scalar_repr(values: &Values) -> String {
    match values {
        Values::Bool(v) => if v[0] { "True" } else { "False" }.to_string(),
        Values::Int(v) => v[0].to_string(),
        Values::Float(v, p) => float_repr(v[0], *p, true),
        Values::Complex(v, p) => {
            let (r, i) = v[0];
            let im = float_repr(i, *p, false);
            if r == 0.0 && !r.is_sign_negative() {
                format!("{im}j")
            } else {
                let re = float_repr(r, *p, false);
                let sign = if im.starts_with('-') { "" } else { "+" };
                format!("({re}{sign}{im}j)")
            }
        }
    }
}

// --- layout: NumPy's `_formatArray` ---

struct Layout<'a> {
    /// Original axis lengths.
    shape: &'a [usize],
    /// Printed axis lengths.
    shown: Vec<usize>,
    summarize: bool,
    edge: usize,
    words: Vec<String>,
}

impl Layout<'_> {
    fn extend(&self, s: &mut String, line: &mut String, word: &str, width: usize, indent: &str) {
        let wrap = line.len() + word.len() > width && line.len() > indent.len();
        if wrap {
            s.push_str(line.trim_end());
            s.push('\n');
            *line = indent.to_string();
        }
        line.push_str(word);
    }

    /// The printed form of the sub-array at `index` (printed coordinates, C order offset
    /// `base` over `shown`).
    fn rec(&self, axis: usize, base: usize, indent: &str, width: usize) -> String {
        let ndim = self.shape.len();
        if axis == ndim {
            return self.words[base].clone();
        }
        let left = ndim - axis;
        let next_indent = format!("{indent} ");
        let next_width = width.saturating_sub(1);
        let n = self.shape[axis];
        let shown = self.shown[axis];
        let summary = self.summarize && 2 * self.edge < n;
        let (lead, trail) = if summary {
            (self.edge, self.edge)
        } else {
            (0, n)
        };
        let stride: usize = self.shown[axis + 1..].iter().product();
        let at = |i: usize| base + i * stride;
        let mut s = String::new();
        if left == 1 {
            let elem_width = width.saturating_sub(1);
            let mut line = indent.to_string();
            for i in 0..lead {
                let w = self.rec(axis + 1, at(i), &next_indent, next_width);
                self.extend(&mut s, &mut line, &w, elem_width, indent);
                line.push(' ');
            }
            if summary {
                self.extend(&mut s, &mut line, "...", elem_width, indent);
                line.push(' ');
            }
            for i in (2..=trail).rev() {
                let w = self.rec(axis + 1, at(shown - i), &next_indent, next_width);
                self.extend(&mut s, &mut line, &w, elem_width, indent);
                line.push(' ');
            }
            let w = self.rec(axis + 1, at(shown - 1), &next_indent, next_width);
            self.extend(&mut s, &mut line, &w, elem_width, indent);
            s.push_str(&line);
        } else {
            let sep = "\n".repeat(left - 1);
            for i in 0..lead {
                let nested = self.rec(axis + 1, at(i), &next_indent, next_width);
                let _ = write!(s, "{indent}{nested}{sep}");
            }
            if summary {
                let _ = write!(s, "{indent}...{sep}");
            }
            for i in (2..=trail).rev() {
                let nested = self.rec(axis + 1, at(shown - i), &next_indent, next_width);
                let _ = write!(s, "{indent}{nested}{sep}");
            }
            let nested = self.rec(axis + 1, at(shown - 1), &next_indent, next_width);
            let _ = write!(s, "{indent}{nested}");
        }
        format!("[{}]", &s[indent.len()..])
    }
}

/// The printed elements of `a`: the whole array, or its `edge` first and last entries
/// along every longer axis when summarized.
fn shown_part(a: &Array, summarize: bool, edge: usize) -> Array {
    let mut x = a.clone();
    if !summarize {
        return x;
    }
    for (k, &n) in a.shape().iter().enumerate() {
        if 2 * edge < n {
            let head = x.slice_axis(k, 0, edge);
            let tail = x.slice_axis(k, n - edge, n);
            x = crate::concatenate(&[&head, &tail], k as isize);
        }
    }
    x
}

impl Array {
    /// The values as NumPy's `str(a)` prints them under the current
    /// [`PrintOptions`]; evaluates and reads back only the printed elements.
    pub fn to_string_numpy(&self) -> Result<String> {
        let o = printoptions();
        if self.ndim() == 0 {
            return Ok(scalar_repr(&read(self)?));
        }
        if self.size() == 0 {
            return Ok("[]".into());
        }
        let summarize = self.size() > o.threshold;
        let part = shown_part(self, summarize, o.edgeitems);
        let values = read(&part)?;
        let layout = Layout {
            shape: self.shape(),
            shown: part.shape().to_vec(),
            summarize,
            edge: o.edgeitems,
            words: strings(&values, &o),
        };
        Ok(layout.rec(0, 0, " ", o.linewidth))
    }
}

/// Evaluates and writes the values as NumPy's `str(a)` does (see
/// [`Array::to_string_numpy`]); an evaluation error is written in place of the values.
/// `{a:?}` shows metadata only and never evaluates.
impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_string_numpy() {
            Ok(s) => f.write_str(&s),
            Err(e) => write!(f, "<array not printable: {e}>"),
        }
    }
}
