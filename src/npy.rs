//! Saving and loading arrays in NumPy's `.npy` and `.npz` formats (`np.save`, `np.load`,
//! `np.savez`).
//!
//! Element data of every dtype but `float16` goes through the `ndarray-npy` crate. Lazyfuse
//! still reads each header itself first, for three reasons: `ndarray-npy` reads into an
//! element type fixed at compile time (its header type is private) while [`load_npy`] learns
//! the dtype from the file; it has no `half::f16` element type, so `float16` data is encoded
//! and decoded here; and it allocates the elements the header's shape asks for before it
//! reads them, so a header that promises more data than the file holds is rejected here
//! first. Archives are read and written with the `zip` crate without compression (what
//! `np.savez` writes).

use crate::{Array, DType, Device, Error, Result};
use ndarray_npy::{ReadNpyExt, WriteNpyExt};
use std::io::{Read, Write};
use std::path::Path;

/// The NumPy format's magic string.
const MAGIC: &[u8] = b"\x93NUMPY";

/// The deepest nesting of brackets a header may use (a valid one uses two: a dict holding a
/// tuple).
const MAX_DEPTH: usize = 8;

impl Array {
    /// Evaluates the array and writes it to `path` in NumPy's `.npy` format (`np.save`):
    /// C order, little-endian, every dtype but `bfloat16`, which NumPy does not have
    /// ([`Error::Unsupported`]; save `a.astype(DType::F32)` instead). The file is created
    /// or truncated; I/O failures are [`Error::Io`].
    pub fn save_npy(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let bytes = encode("save_npy", path, self)?;
        std::fs::write(path, bytes).map_err(|e| io_error("save_npy", path, e))
    }
}

/// Reads the `.npy` file at `path` (as `np.load` does) into an array on the default device
/// ([`default_device`](crate::default_device)).
///
/// Reads every dtype lazyfuse and NumPy share (`bool`, `int8`..`int64`, `uint8`..`uint64`,
/// `float16`, `float32`, `float64`, `complex64`, `complex128`), in C or Fortran order and
/// either byte order, format versions 1.0, 2.0 and 3.0.
///
/// # Errors
/// [`Error::Io`] naming the path and the problem when the file cannot be read, its header is
/// malformed, its dtype is one lazyfuse does not have (strings, objects, structured dtypes)
/// or its data is shorter or longer than the header's shape says; the device's errors when
/// the data cannot be copied to it.
pub fn load_npy(path: impl AsRef<Path>) -> Result<Array> {
    load_npy_on(path, &crate::device::try_default_device()?)
}

/// [`load_npy`] onto `dev`.
pub fn load_npy_on(path: impl AsRef<Path>, dev: &Device) -> Result<Array> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| io_error("load_npy", path, e))?;
    decode("load_npy", path, &bytes, dev)
}

/// Evaluates `arrays` (in one plan) and writes them to `path` as an uncompressed `.npz`
/// archive, as `np.savez(path, name=array, ..)` does: one `<name>.npy` member per array,
/// in the order given. Names must be distinct; `bfloat16` arrays are an
/// [`Error::Unsupported`] as in [`Array::save_npy`], and nothing is written then.
pub fn savez(path: impl AsRef<Path>, arrays: &[(&str, &Array)]) -> Result<()> {
    const OP: &str = "savez";
    let path = path.as_ref();
    for (i, (name, _)) in arrays.iter().enumerate() {
        if arrays[..i].iter().any(|(n, _)| n == name) {
            return Err(problem(
                OP,
                path,
                format!("the name {name:?} is given twice"),
            ));
        }
    }
    let all: Vec<&Array> = arrays.iter().map(|(_, a)| *a).collect();
    crate::eval(&all)?;
    let members = arrays
        .iter()
        .map(|(name, a)| Ok((format!("{name}.npy"), encode(OP, path, a)?)))
        .collect::<Result<Vec<_>>>()?;
    let file = std::fs::File::create(path).map_err(|e| io_error(OP, path, e))?;
    let mut zip = zip::ZipWriter::new(std::io::BufWriter::new(file));
    let zip_err = |e: zip::result::ZipError| problem(OP, path, e);
    for (name, bytes) in &members {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(bytes.len() as u64 >= u64::from(u32::MAX));
        zip.start_file(name, options).map_err(zip_err)?;
        zip.write_all(bytes).map_err(|e| io_error(OP, path, e))?;
    }
    let mut out = zip.finish().map_err(zip_err)?;
    out.flush().map_err(|e| io_error(OP, path, e))
}

/// Reads every array of the `.npz` archive at `path` (`np.savez`'s output) onto the default
/// device, in the archive's order, each with its name (the member name without `.npy`).
///
/// # Errors
/// As [`load_npy`] for each member, and [`Error::Io`] when the archive is not a zip file,
/// holds a member that is not an `.npy` file, or is compressed (`np.savez_compressed`):
/// lazyfuse reads stored archives only.
pub fn loadz(path: impl AsRef<Path>) -> Result<Vec<(String, Array)>> {
    loadz_on(path, &crate::device::try_default_device()?)
}

/// [`loadz`] onto `dev`.
pub fn loadz_on(path: impl AsRef<Path>, dev: &Device) -> Result<Vec<(String, Array)>> {
    const OP: &str = "loadz";
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| io_error(OP, path, e))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| problem(OP, path, format!("not a .npz (zip) archive: {e}")))?;
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let member = zip.by_index_raw(i).map_err(|e| problem(OP, path, e))?;
        let name = member.name().to_string();
        if member.compression() != zip::CompressionMethod::Stored {
            return Err(problem(
                OP,
                path,
                format!(
                    "member {name} is compressed ({}); lazyfuse reads stored archives \
                     (np.savez), not np.savez_compressed ones",
                    member.compression()
                ),
            ));
        }
        if member.is_dir() {
            continue;
        }
        drop(member);
        let Some(key) = name.strip_suffix(".npy") else {
            return Err(problem(
                OP,
                path,
                format!("member {name} is not an .npy file"),
            ));
        };
        let mut bytes = Vec::new();
        zip.by_index(i)
            .and_then(|mut m| Ok(m.read_to_end(&mut bytes)?))
            .map_err(|e| problem(OP, path, format!("member {name}: {e}")))?;
        let member_path = path.join(&name);
        out.push((key.to_string(), decode(OP, &member_path, &bytes, dev)?));
    }
    Ok(out)
}

/// [`Error::Io`] for a failed file operation.
fn io_error(op: &'static str, path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        op,
        path: path.display().to_string(),
        msg: e.to_string(),
        source: Some(e),
    }
}

/// [`Error::Io`] for a file whose contents the operation cannot use.
fn problem(op: &'static str, path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::Io {
        op,
        path: path.display().to_string(),
        msg: msg.to_string(),
        source: None,
    }
}

// --- writing ---

/// The `.npy` bytes of `a` (evaluating it).
fn encode(op: &'static str, path: &Path, a: &Array) -> Result<Vec<u8>> {
    macro_rules! via_ndarray_npy {
        ($t:ty) => {{
            let host = a.to_host::<$t>()?;
            let mut out = Vec::new();
            host.write_npy(&mut out).map_err(|e| problem(op, path, e))?;
            out
        }};
    }
    Ok(match a.dtype() {
        DType::Bool => via_ndarray_npy!(bool),
        DType::I8 => via_ndarray_npy!(i8),
        DType::I16 => via_ndarray_npy!(i16),
        DType::I32 => via_ndarray_npy!(i32),
        DType::I64 => via_ndarray_npy!(i64),
        DType::U8 => via_ndarray_npy!(u8),
        DType::U16 => via_ndarray_npy!(u16),
        DType::U32 => via_ndarray_npy!(u32),
        DType::U64 => via_ndarray_npy!(u64),
        DType::F32 => via_ndarray_npy!(f32),
        DType::F64 => via_ndarray_npy!(f64),
        DType::C64 => via_ndarray_npy!(crate::c32),
        DType::C128 => via_ndarray_npy!(crate::c64),
        DType::F16 => {
            let data = a.to_vec::<half::f16>()?;
            let mut out = header_bytes("<f2", a.shape());
            out.reserve(2 * data.len());
            for x in data {
                out.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            out
        }
        DType::BF16 => {
            return Err(Error::Unsupported {
                op,
                msg: format!(
                    "{}: dtype bfloat16 has no .npy descr (NumPy has no bfloat16); save \
                     a.astype(DType::F32) instead",
                    path.display()
                ),
            })
        }
    })
}

/// A version 1.0 (or, for a header of 64 KiB or more, 2.0) `.npy` header for C-order data,
/// padded with spaces so that the data starts at a multiple of 64 bytes, as NumPy writes.
fn header_bytes(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let (version, len_bytes) = if dict.len() + 1 + 10 < 1 << 16 {
        (1u8, 2)
    } else {
        (2u8, 4)
    };
    let prefix = MAGIC.len() + 2 + len_bytes;
    while !(prefix + dict.len() + 1).is_multiple_of(64) {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = Vec::with_capacity(prefix + dict.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out
}

// --- reading ---

/// What a `.npy` header says.
struct Header {
    descr: String,
    dtype: DType,
    big_endian: bool,
    fortran: bool,
    shape: Vec<usize>,
    /// Where the element data starts.
    data_start: usize,
}

/// An array from the bytes of a whole `.npy` file.
fn decode(op: &'static str, path: &Path, bytes: &[u8], dev: &Device) -> Result<Array> {
    let h = parse_header(bytes).map_err(|m| problem(op, path, m))?;
    let shape_text = format!("{:?}", h.shape);
    let n = h
        .shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| problem(op, path, format!("shape {shape_text} is too large")))?;
    let need = n
        .checked_mul(h.dtype.size())
        .ok_or_else(|| problem(op, path, format!("shape {shape_text} is too large")))?;
    let have = bytes.len() - h.data_start;
    if have < need {
        return Err(problem(
            op,
            path,
            format!(
                "truncated file: the header declares shape {shape_text} of {} ({need} bytes \
                 of data), the file holds {have}",
                h.descr
            ),
        ));
    }
    if have > need {
        return Err(problem(
            op,
            path,
            format!(
                "{} bytes after the {need} bytes of data the header declares (shape \
                 {shape_text} of {})",
                have - need,
                h.descr
            ),
        ));
    }
    macro_rules! via_ndarray_npy {
        ($t:ty) => {{
            let a = ndarray::ArrayD::<$t>::read_npy(bytes).map_err(|e| problem(op, path, e))?;
            to_array(a, dev)
        }};
    }
    match h.dtype {
        DType::Bool => via_ndarray_npy!(bool),
        DType::I8 => via_ndarray_npy!(i8),
        DType::I16 => via_ndarray_npy!(i16),
        DType::I32 => via_ndarray_npy!(i32),
        DType::I64 => via_ndarray_npy!(i64),
        DType::U8 => via_ndarray_npy!(u8),
        DType::U16 => via_ndarray_npy!(u16),
        DType::U32 => via_ndarray_npy!(u32),
        DType::U64 => via_ndarray_npy!(u64),
        DType::F32 => via_ndarray_npy!(f32),
        DType::F64 => via_ndarray_npy!(f64),
        DType::C64 => via_ndarray_npy!(crate::c32),
        DType::C128 => via_ndarray_npy!(crate::c64),
        DType::F16 => {
            let data: Vec<half::f16> = bytes[h.data_start..]
                .chunks_exact(2)
                .map(|w| {
                    let w = [w[0], w[1]];
                    half::f16::from_bits(if h.big_endian {
                        u16::from_be_bytes(w)
                    } else {
                        u16::from_le_bytes(w)
                    })
                })
                .collect();
            let dim = ndarray::IxDyn(&h.shape);
            let a = if h.fortran {
                ndarray::ArrayD::from_shape_vec(ndarray::ShapeBuilder::f(dim), data)
            } else {
                ndarray::ArrayD::from_shape_vec(dim, data)
            };
            to_array(a.map_err(|e| problem(op, path, e))?, dev)
        }
        DType::BF16 => Err(Error::internal(op, "no .npy descr maps to bfloat16")),
    }
}

/// An array holding `a` on `dev`, moving the data when it is already in C order.
fn to_array<T: crate::Element>(a: ndarray::ArrayD<T>, dev: &Device) -> Result<Array> {
    if a.is_standard_layout() {
        let shape = a.shape().to_vec();
        let (data, _) = a.into_raw_vec_and_offset();
        Array::from_vec_on(data, &shape, dev)
    } else {
        Array::from_ndarray_on(&a, dev)
    }
}

/// The header of a `.npy` file, or what is wrong with it.
fn parse_header(bytes: &[u8]) -> std::result::Result<Header, String> {
    if bytes.len() < MAGIC.len() + 2 || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a .npy file (no \\x93NUMPY magic string)".into());
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let len_bytes = match major {
        1 => 2,
        2 | 3 => 4,
        _ => return Err(format!("unsupported .npy format version {major}.{minor}")),
    };
    let start = 8 + len_bytes;
    let Some(len_field) = bytes.get(8..start) else {
        return Err("truncated file: the header length is cut off".into());
    };
    let len = len_field
        .iter()
        .rev()
        .fold(0usize, |n, &b| (n << 8) | usize::from(b));
    let Some(text) = start.checked_add(len).and_then(|end| bytes.get(start..end)) else {
        return Err(format!(
            "truncated file: the header is {len} bytes, the file holds {} after the length",
            bytes.len() - start
        ));
    };
    // versions 1 and 2 store latin-1, version 3 UTF-8
    let text: String = if major == 3 {
        std::str::from_utf8(text)
            .map_err(|e| format!("header is not UTF-8: {e}"))?
            .to_string()
    } else {
        text.iter().map(|&b| char::from(b)).collect()
    };
    let dict = match Literal::parse(&text) {
        Ok(Literal::Dict(d)) => d,
        Ok(_) => return Err(format!("header is not a dict: {:?}", text.trim_end())),
        Err(e) => return Err(format!("malformed header {:?}: {e}", text.trim_end())),
    };
    let get = |key: &str| {
        dict.iter()
            .find(|(k, _)| matches!(k, Literal::Str(s) if s == key))
            .map(|(_, v)| v)
            .ok_or_else(|| format!("header has no {key:?}: {:?}", text.trim_end()))
    };
    let descr = match get("descr")? {
        Literal::Str(s) => s.clone(),
        Literal::List(fields) => {
            return Err(format!(
                "unsupported dtype descr: a structured dtype of {} fields (lazyfuse has none)",
                fields.len()
            ))
        }
        other => return Err(format!("unsupported dtype descr {other:?}")),
    };
    let (dtype, big_endian) = descr_dtype(&descr).ok_or_else(|| {
        format!(
            "unsupported dtype descr {descr:?} (lazyfuse reads bool, int8..int64, \
             uint8..uint64, float16, float32, float64, complex64 and complex128)"
        )
    })?;
    let fortran = match get("fortran_order")? {
        Literal::Bool(b) => *b,
        other => return Err(format!("fortran_order is {other:?}, not True or False")),
    };
    let shape = match get("shape")? {
        Literal::Tuple(t) => t
            .iter()
            .map(|d| match d {
                Literal::Int(n) => Ok(*n),
                other => Err(format!("shape entry {other:?} is not a length")),
            })
            .collect::<std::result::Result<Vec<_>, _>>()?,
        other => return Err(format!("shape is {other:?}, not a tuple")),
    };
    Ok(Header {
        descr,
        dtype,
        big_endian,
        fortran,
        shape,
        data_start: start + len,
    })
}

/// The dtype and byte order (`true`: big-endian) of a NumPy type descr such as `'<f8'`.
/// Only the forms NumPy writes: `|` for one-byte types, `<` or `>` for the others.
fn descr_dtype(descr: &str) -> Option<(DType, bool)> {
    let (order, code) = descr.split_at_checked(1)?;
    let dtype = match code {
        "b1" => DType::Bool,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        "c8" => DType::C64,
        "c16" => DType::C128,
        _ => return None,
    };
    match (order, dtype.size()) {
        ("|", 1) => Some((dtype, false)),
        ("<", n) if n > 1 => Some((dtype, false)),
        (">", n) if n > 1 => Some((dtype, true)),
        _ => None,
    }
}

/// The Python literals a `.npy` header is made of.
#[derive(Debug)]
enum Literal {
    Str(String),
    Bool(bool),
    Int(usize),
    None,
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
    Dict(Vec<(Literal, Literal)>),
}

/// A recursive-descent reader of [`Literal`]s, nesting at most [`MAX_DEPTH`] deep.
struct LiteralParser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Literal {
    /// The one literal `text` holds (surrounding whitespace allowed).
    fn parse(text: &str) -> std::result::Result<Literal, String> {
        let mut p = LiteralParser {
            s: text.as_bytes(),
            at: 0,
        };
        let v = p.value(0)?;
        p.skip_ws();
        if p.at != p.s.len() {
            return Err(format!("unexpected text at byte {}", p.at));
        }
        Ok(v)
    }
}

impl LiteralParser<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.at).is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.at).copied()
    }

    fn value(&mut self, depth: usize) -> std::result::Result<Literal, String> {
        if depth > MAX_DEPTH {
            return Err("nested too deeply".into());
        }
        match self.peek() {
            None => Err("unexpected end".into()),
            Some(q @ (b'\'' | b'"')) => self.string(q),
            Some(b'(') => {
                let (items, trailing_comma) = self.items(b')', depth)?;
                Ok(match items.len() {
                    // `(x)` is x itself, `(x,)` a tuple
                    1 if !trailing_comma => items.into_iter().next().unwrap_or(Literal::None),
                    _ => Literal::Tuple(items),
                })
            }
            Some(b'[') => Ok(Literal::List(self.items(b']', depth)?.0)),
            Some(b'{') => self.dict(depth),
            Some(b) if b.is_ascii_digit() => self.int(),
            Some(b) if b.is_ascii_alphabetic() => {
                let start = self.at;
                while self
                    .s
                    .get(self.at)
                    .is_some_and(|b| b.is_ascii_alphanumeric())
                {
                    self.at += 1;
                }
                match &self.s[start..self.at] {
                    b"True" => Ok(Literal::Bool(true)),
                    b"False" => Ok(Literal::Bool(false)),
                    b"None" => Ok(Literal::None),
                    w => Err(format!("unknown name {:?}", String::from_utf8_lossy(w))),
                }
            }
            Some(b) => Err(format!(
                "unexpected {:?} at byte {}",
                char::from(b),
                self.at
            )),
        }
    }

    /// A quoted string without escapes (NumPy's descrs and keys have none).
    fn string(&mut self, quote: u8) -> std::result::Result<Literal, String> {
        let start = self.at + 1;
        let len = self.s[start..]
            .iter()
            .position(|&b| b == quote)
            .ok_or("unterminated string")?;
        let body = &self.s[start..start + len];
        if body.contains(&b'\\') {
            return Err("escapes in strings are not supported".into());
        }
        self.at = start + len + 1;
        Ok(Literal::Str(String::from_utf8_lossy(body).into_owned()))
    }

    fn int(&mut self) -> std::result::Result<Literal, String> {
        let start = self.at;
        while self.s.get(self.at).is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        // a trailing `L` is how Python 2 wrote long integers
        let digits = String::from_utf8_lossy(&self.s[start..self.at]).into_owned();
        if self.s.get(self.at) == Some(&b'L') {
            self.at += 1;
        }
        digits
            .parse()
            .map(Literal::Int)
            .map_err(|_| format!("length {digits} does not fit usize"))
    }

    /// Comma-separated values up to `close` (after the opening bracket), and whether a comma
    /// came last.
    fn items(
        &mut self,
        close: u8,
        depth: usize,
    ) -> std::result::Result<(Vec<Literal>, bool), String> {
        self.at += 1;
        let mut items = Vec::new();
        let mut trailing_comma = false;
        loop {
            if self.peek() == Some(close) {
                self.at += 1;
                return Ok((items, trailing_comma));
            }
            items.push(self.value(depth + 1)?);
            trailing_comma = false;
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    trailing_comma = true;
                }
                Some(b) if b == close => {}
                _ => return Err(format!("expected ',' or {:?}", char::from(close))),
            }
        }
    }

    fn dict(&mut self, depth: usize) -> std::result::Result<Literal, String> {
        self.at += 1;
        let mut entries = Vec::new();
        loop {
            if self.peek() == Some(b'}') {
                self.at += 1;
                return Ok(Literal::Dict(entries));
            }
            let key = self.value(depth + 1)?;
            if self.peek() != Some(b':') {
                return Err("expected ':' after a dict key".into());
            }
            self.at += 1;
            let value = self.value(depth + 1)?;
            entries.push((key, value));
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {}
                _ => return Err("expected ',' or '}'".into()),
            }
        }
    }
}
