//! The TCP rendezvous of a job's processes: rank 0 listens at `MASTER_ADDR:MASTER_PORT`,
//! every other rank connects (retrying until the timeout) and says who it is; once all have
//! arrived, rank 0 checks that the ranks are distinct and agree on the world size, and hands
//! each the same 128 bytes (the NCCL unique id). The connections stay open for
//! [`Rendezvous::barrier`]. Plain `std::net`, every wait bounded by the launch's timeout,
//! every error naming the address, the variables it came from and the ranks involved.
//!
//! Wire format (little-endian): a rank says `b"LFRV"`, version 1, a kind byte (1: it runs
//! on a GPU and wants an NCCL id, 0: it does not), two zero bytes, its rank and the world
//! size as `u32`s. Rank 0 answers `0`, the kind byte and the 128-byte payload, or `1`, a
//! `u32` length and a UTF-8 message. A barrier is `B` from each rank, answered by `G`, or by
//! `E` and a message.

use super::launch::Launch;
use crate::{Error, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The bytes rank 0 hands out (an `ncclUniqueId`'s size).
pub const PAYLOAD_BYTES: usize = 128;

const MAGIC: &[u8; 4] = b"LFRV";
const VERSION: u8 = 1;
/// How much longer than the timeout a rank waits for rank 0's answer, so that rank 0's
/// own timeout (which names the missing ranks) is what it reports.
const GRACE: Duration = Duration::from_secs(2);

/// The open connections of a rendezvous.
enum Link {
    /// A world of one.
    Alone,
    /// Rank 0: the stream of each other rank, by rank (index 0 unused).
    Root(Vec<Option<TcpStream>>),
    /// Another rank: its stream to rank 0.
    Leaf(TcpStream),
}

/// A completed rendezvous: the payload rank 0 handed out, and the connections kept for
/// [`Rendezvous::barrier`].
pub struct Rendezvous {
    rank: usize,
    world: usize,
    /// `host:port (MASTER_ADDR:MASTER_PORT)`, for messages.
    place: String,
    timeout: Duration,
    payload: [u8; PAYLOAD_BYTES],
    kind: u8,
    link: Mutex<Link>,
}

impl std::fmt::Debug for Rendezvous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Rendezvous(rank {} of {} at {})",
            self.rank, self.world, self.place
        )
    }
}

fn err(op: &'static str, msg: String) -> Error {
    Error::Distributed { op, msg }
}

/// Meets the other ranks of `launch` (see the module docs) and returns the payload rank 0
/// made with `payload`, which runs on rank 0 only, once every rank has arrived. A world of
/// one returns at once with its own payload.
///
/// Errors (never a hang: every wait ends at the launch's timeout): rank 0 cannot listen at
/// its address; a rank cannot reach rank 0 within the timeout; ranks that have not arrived
/// when the timeout ends (rank 0 names them, and tells the ranks that did arrive); two
/// processes claiming one rank; a world size that differs from rank 0's.
pub fn rendezvous(
    launch: &Launch,
    payload: impl FnOnce() -> Result<[u8; PAYLOAD_BYTES]>,
) -> Result<Rendezvous> {
    meet(launch, 0, payload)
}

/// [`rendezvous`] where each rank states its `kind` (0 or 1), which must be rank 0's.
pub(crate) fn meet(
    launch: &Launch,
    kind: u8,
    payload: impl FnOnce() -> Result<[u8; PAYLOAD_BYTES]>,
) -> Result<Rendezvous> {
    let mut r = Rendezvous {
        rank: launch.rank,
        world: launch.world_size,
        place: String::new(),
        timeout: launch.timeout,
        payload: [0; PAYLOAD_BYTES],
        kind,
        link: Mutex::new(Link::Alone),
    };
    if launch.world_size == 1 {
        r.payload = payload()?;
        return Ok(r);
    }
    let Some((host, port)) = &launch.master else {
        return Err(err(
            "rendezvous",
            format!(
                "{} processes but no rendezvous address (MASTER_ADDR)",
                launch.world_size
            ),
        ));
    };
    r.place = format!("{host}:{port} (MASTER_ADDR:MASTER_PORT)");
    let deadline = Instant::now() + launch.timeout;
    if launch.rank == 0 {
        let streams = r.serve(host, *port, deadline, payload)?;
        *r.link.get_mut().unwrap_or_else(|e| e.into_inner()) = Link::Root(streams);
    } else {
        let stream = r.join(host, *port, deadline)?;
        *r.link.get_mut().unwrap_or_else(|e| e.into_inner()) = Link::Leaf(stream);
    }
    Ok(r)
}

/// The time left until `deadline`, at least 1 ms (a socket timeout of 0 is invalid).
fn left(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

/// Ranks `1..world` for which `arrived` is false, as "1, 3".
fn missing(arrived: &[bool]) -> String {
    let m: Vec<String> = arrived
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, &a)| !a)
        .map(|(i, _)| i.to_string())
        .collect();
    m.join(", ")
}

/// Writes rank 0's error answer (status 1, length, message); errors ignored: the rank
/// may be gone.
fn tell_error(s: &mut TcpStream, msg: &str) {
    let mut b = vec![1u8];
    b.extend_from_slice(&(msg.len() as u32).to_le_bytes());
    b.extend_from_slice(msg.as_bytes());
    let _ = s.write_all(&b);
}

/// Reads an error message (`u32` length, UTF-8 bytes) after its status byte.
fn read_message(s: &mut TcpStream) -> String {
    let mut len = [0u8; 4];
    if s.read_exact(&mut len).is_err() {
        return "(no message)".into();
    }
    let n = (u32::from_le_bytes(len) as usize).min(1 << 16);
    let mut m = vec![0u8; n];
    if s.read_exact(&mut m).is_err() {
        return "(message cut short)".into();
    }
    String::from_utf8_lossy(&m).into_owned()
}

impl Rendezvous {
    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of processes.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// The 128 bytes rank 0 handed out.
    pub fn payload(&self) -> &[u8; PAYLOAD_BYTES] {
        &self.payload
    }

    /// Whether rank 0 handed out an NCCL id (every rank runs on a GPU).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(crate) fn is_nccl_id(&self) -> bool {
        self.kind == 1
    }

    /// Rank 0: listens, admits every other rank, checks them, hands out the payload.
    fn serve(
        &mut self,
        host: &str,
        port: u16,
        deadline: Instant,
        payload: impl FnOnce() -> Result<[u8; PAYLOAD_BYTES]>,
    ) -> Result<Vec<Option<TcpStream>>> {
        // the address itself when it is one of this host's, else every interface (a
        // MASTER_ADDR can name the host by an address that only the others route to)
        let listener = TcpListener::bind((host, port))
            .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
            .map_err(|e| {
                err(
                    "rendezvous",
                    format!(
                        "rank 0 cannot listen at {}: {e} (is another job using MASTER_PORT?)",
                        self.place
                    ),
                )
            })?;
        listener
            .set_nonblocking(true)
            .map_err(|e| err("rendezvous", format!("rank 0 at {}: {e}", self.place)))?;
        let world = self.world;
        let mut streams: Vec<Option<TcpStream>> = (0..world).map(|_| None).collect();
        let mut arrived = vec![false; world];
        arrived[0] = true;
        let fail = |streams: &mut Vec<Option<TcpStream>>, msg: String| -> Error {
            for s in streams.iter_mut().flatten() {
                tell_error(s, &msg);
            }
            err("rendezvous", msg)
        };
        while arrived.iter().any(|a| !a) {
            match listener.accept() {
                Ok((mut s, from)) => match self.admit(&mut s, from, deadline) {
                    Ok(None) => {} // not a lazyfuse rank, or it hung up: ignored
                    Ok(Some((rank, wsize, kind))) => {
                        let problem = if wsize != world {
                            Some(format!(
                                "rank {rank} (at {from}) has a world size of {wsize}, rank 0 \
                                 has {world}: the processes were not started as one job"
                            ))
                        } else if rank == 0 || rank >= world {
                            Some(format!(
                                "a process at {from} claims rank {rank}; ranks 1 to {} are \
                                 expected",
                                world - 1
                            ))
                        } else if arrived[rank] {
                            Some(format!(
                                "rank {rank} arrived twice (again from {from}): two processes \
                                 were given one rank"
                            ))
                        } else if kind != self.kind {
                            let what = |k: u8| if k == 1 { "a GPU" } else { "the CPU" };
                            Some(format!(
                                "rank {rank} runs on {} but rank 0 on {}: every rank must run \
                                 on the same kind of device",
                                what(kind),
                                what(self.kind)
                            ))
                        } else {
                            None
                        };
                        if let Some(msg) = problem {
                            tell_error(&mut s, &msg);
                            return Err(fail(&mut streams, msg));
                        }
                        arrived[rank] = true;
                        streams[rank] = Some(s);
                    }
                    Err(e) => return Err(fail(&mut streams, e.to_string())),
                },
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let msg = format!(
                            "rank(s) {} of {world} did not arrive at {} within {:.0?} \
                             (LAZYFUSE_DIST_TIMEOUT)",
                            missing(&arrived),
                            self.place,
                            self.timeout
                        );
                        return Err(fail(&mut streams, msg));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => {
                    let msg = format!("rank 0 at {}: accept failed: {e}", self.place);
                    return Err(fail(&mut streams, msg));
                }
            }
        }
        self.payload = match payload() {
            Ok(p) => p,
            Err(e) => return Err(fail(&mut streams, format!("rank 0: {e}"))),
        };
        let mut answer = vec![0u8, self.kind];
        answer.extend_from_slice(&self.payload);
        for (rank, s) in streams.iter_mut().enumerate() {
            if let Some(s) = s {
                s.write_all(&answer).map_err(|e| {
                    err(
                        "rendezvous",
                        format!("rank 0 could not answer rank {rank}: {e}"),
                    )
                })?;
            }
        }
        Ok(streams)
    }

    /// Reads the greeting of a new connection: `Some((rank, world, kind))`, or `None` for
    /// a connection that is not a lazyfuse rank of this protocol.
    fn admit(
        &self,
        s: &mut TcpStream,
        from: SocketAddr,
        deadline: Instant,
    ) -> Result<Option<(usize, usize, u8)>> {
        let io =
            |e: std::io::Error| err("rendezvous", format!("rank 0, connection from {from}: {e}"));
        s.set_nonblocking(false).map_err(io)?;
        s.set_nodelay(true).map_err(io)?;
        s.set_read_timeout(Some(left(deadline))).map_err(io)?;
        let mut hello = [0u8; 16];
        if s.read_exact(&mut hello).is_err() || &hello[..4] != MAGIC || hello[4] != VERSION {
            return Ok(None);
        }
        let rank = u32::from_le_bytes(hello[8..12].try_into().expect("4 bytes")) as usize;
        let world = u32::from_le_bytes(hello[12..16].try_into().expect("4 bytes")) as usize;
        Ok(Some((rank, world, hello[5])))
    }

    /// Another rank: connects to rank 0 (retrying until the deadline), says who it is and
    /// reads the payload.
    fn join(&mut self, host: &str, port: u16, deadline: Instant) -> Result<TcpStream> {
        let rank = self.rank;
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|e| {
                err(
                    "rendezvous",
                    format!("rank {rank}: MASTER_ADDR={host:?} does not resolve: {e}"),
                )
            })?
            .collect();
        let mut last = String::from("no address");
        let mut stream = None;
        'retry: loop {
            for a in &addrs {
                match TcpStream::connect_timeout(a, left(deadline).min(Duration::from_secs(2))) {
                    Ok(s) => {
                        stream = Some(s);
                        break 'retry;
                    }
                    Err(e) => last = e.to_string(),
                }
            }
            if Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let Some(mut s) = stream else {
            return Err(err(
                "rendezvous",
                format!(
                    "rank {rank} could not reach rank 0 at {} within {:.0?} \
                     (LAZYFUSE_DIST_TIMEOUT): {last}",
                    self.place, self.timeout
                ),
            ));
        };
        let io =
            |e: std::io::Error| err("rendezvous", format!("rank {rank} at {}: {e}", self.place));
        s.set_nodelay(true).map_err(io)?;
        let mut hello = Vec::with_capacity(16);
        hello.extend_from_slice(MAGIC);
        hello.extend_from_slice(&[VERSION, self.kind, 0, 0]);
        hello.extend_from_slice(&(rank as u32).to_le_bytes());
        hello.extend_from_slice(&(self.world as u32).to_le_bytes());
        s.write_all(&hello).map_err(io)?;
        // rank 0 answers once every rank has arrived, or at its own timeout with the names
        // of the missing ranks
        s.set_read_timeout(Some(self.timeout + GRACE)).map_err(io)?;
        let mut status = [0u8; 2];
        if let Err(e) = s.read_exact(&mut status[..1]) {
            return Err(err(
                "rendezvous",
                format!(
                    "rank {rank}: rank 0 at {} did not answer within {:.0?}: {e}",
                    self.place, self.timeout
                ),
            ));
        }
        if status[0] != 0 {
            let msg = read_message(&mut s);
            return Err(err(
                "rendezvous",
                format!("rank {rank}: rank 0 reports: {msg}"),
            ));
        }
        s.read_exact(&mut status[1..]).map_err(io)?;
        self.kind = status[1];
        s.read_exact(&mut self.payload).map_err(io)?;
        Ok(s)
    }

    /// Waits until every rank has called `barrier` (host processes only: queued device work
    /// is not waited for). An error, naming the ranks that did not come, when the launch's
    /// timeout passes first, or when a rank's connection closed (its process ended).
    pub fn barrier(&self) -> Result<()> {
        let mut link = self.link.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = Instant::now() + self.timeout;
        match &mut *link {
            Link::Alone => Ok(()),
            Link::Leaf(s) => {
                let io = |e: std::io::Error| {
                    err(
                        "barrier",
                        format!(
                            "rank {}: connection to rank 0 at {}: {e}",
                            self.rank, self.place
                        ),
                    )
                };
                s.write_all(b"B").map_err(io)?;
                s.set_read_timeout(Some(self.timeout + GRACE)).map_err(io)?;
                let mut a = [0u8; 1];
                s.read_exact(&mut a).map_err(io)?;
                match a[0] {
                    b'G' => Ok(()),
                    _ => {
                        let msg = read_message(s);
                        Err(err(
                            "barrier",
                            format!("rank {}: rank 0 reports: {msg}", self.rank),
                        ))
                    }
                }
            }
            Link::Root(streams) => {
                let mut came = vec![false; self.world];
                came[0] = true;
                let mut closed = Vec::new();
                for (rank, s) in streams.iter_mut().enumerate() {
                    let Some(s) = s else { continue };
                    let mut b = [0u8; 1];
                    let ok = s.set_read_timeout(Some(left(deadline))).is_ok()
                        && match s.read_exact(&mut b) {
                            Ok(()) => b[0] == b'B',
                            Err(e) => {
                                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                                    closed.push(rank);
                                }
                                false
                            }
                        };
                    came[rank] = ok;
                }
                if came.iter().all(|&c| c) {
                    for s in streams.iter_mut().flatten() {
                        s.write_all(b"G").map_err(|e| {
                            err("barrier", format!("rank 0 could not release a rank: {e}"))
                        })?;
                    }
                    return Ok(());
                }
                let mut msg = format!(
                    "rank(s) {} of {} did not reach the barrier within {:.0?} \
                     (LAZYFUSE_DIST_TIMEOUT)",
                    missing(&came),
                    self.world,
                    self.timeout
                );
                if !closed.is_empty() {
                    msg.push_str(&format!("; the connection of rank(s) {closed:?} closed"));
                }
                for (rank, s) in streams.iter_mut().enumerate() {
                    if let (Some(s), true) = (s, came[rank]) {
                        let mut b = vec![b'E'];
                        b.extend_from_slice(&(msg.len() as u32).to_le_bytes());
                        b.extend_from_slice(msg.as_bytes());
                        let _ = s.write_all(&b);
                    }
                }
                Err(err("barrier", msg))
            }
        }
    }
}
