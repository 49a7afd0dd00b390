//! Copies between two GPUs: one `cuMemcpyPeerAsync` on the destination's stream, after an
//! event of the source's last writer, never through host memory. Peer access is enabled in
//! both directions the first time a pair copies, where `cuDeviceCanAccessPeer` says the
//! hardware allows it (NVLink or PCIe peer-to-peer); without it the driver still copies
//! device to device, through its own staging.

use super::compile::lock;
use super::device::CudaDevice;
use super::driver_err;
use super::memory::CudaBuffer;
use crate::config::debug_log;
use crate::Result;
use cudarc::driver::sys as drv_sys;

/// What a device knows of its peers: for each other ordinal asked about, whether this
/// device's context may access that device's memory directly (access enabled).
#[derive(Default)]
pub(super) struct Peers(std::sync::Mutex<Vec<(usize, bool)>>);

impl CudaDevice {
    /// Whether this device reads and writes `peer`'s memory directly: asked of the driver
    /// and, where it can, enabled (`cuCtxEnablePeerAccess`) on the first call for `peer`;
    /// remembered afterwards.
    pub(crate) fn peer_access(&self, peer: &CudaDevice) -> Result<bool> {
        if peer.ordinal() == self.ordinal() {
            return Ok(true);
        }
        let mut known = lock(&self.peers.0);
        if let Some(&(_, on)) = known.iter().find(|(o, _)| *o == peer.ordinal()) {
            return Ok(on);
        }
        let mut can: std::ffi::c_int = 0;
        // SAFETY: `can` is a valid place for one int; both device handles are live.
        unsafe {
            drv_sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), peer.ctx.cu_device())
        }
        .result()
        .map_err(driver_err("cuDeviceCanAccessPeer"))?;
        let mut on = can != 0;
        if on {
            self.ctx
                .bind_to_thread()
                .map_err(driver_err("cuCtxSetCurrent"))?;
            // SAFETY: this device's context is current; the peer's context is live (devices
            // live for the process). Enabling access twice is reported, not harmful.
            let r = unsafe { drv_sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) };
            crate::profile::calls::note("cuCtxEnablePeerAccess");
            match r {
                drv_sys::cudaError_enum::CUDA_SUCCESS
                | drv_sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                e => {
                    debug_log!(
                        1,
                        "peer access cuda:{} -> cuda:{} not enabled: {e:?}",
                        self.ordinal(),
                        peer.ordinal()
                    );
                    on = false;
                }
            }
        }
        known.push((peer.ordinal(), on));
        Ok(on)
    }

    /// A new buffer of this device holding a copy of `src`, a buffer of another GPU:
    /// one `cuMemcpyPeerAsync` queued on this thread's stream of this device, after the
    /// work that wrote `src` (an event of its writer's stream; the host does not wait).
    /// `src` is freed only after the copy (it records this stream as a reader).
    pub(crate) fn copy_from_peer(&self, src: &CudaBuffer) -> Result<CudaBuffer> {
        let from = src.device();
        // both directions, so that the driver can use either side's copy engines
        self.peer_access(from)?;
        from.peer_access(self)?;
        let me = self.arc()?;
        let dst = self.alloc(me, src.dtype(), src.len())?;
        let lane = self.order(&[src], &[])?;
        let bytes = src.len() * src.dtype().size();
        if bytes > 0 {
            self.ctx
                .bind_to_thread()
                .map_err(driver_err("cuCtxSetCurrent"))?;
            // SAFETY: `dst` (this context) and `src` (the source's context) are live
            // allocations of `bytes` bytes each; the copy is queued on this device's stream,
            // which waits for `src`'s writer and before whose work `src` cannot be freed
            // (`order` above recorded it as a reader).
            unsafe {
                drv_sys::cuMemcpyPeerAsync(
                    dst.device_ptr(),
                    self.ctx.cu_ctx(),
                    src.device_ptr(),
                    from.ctx.cu_ctx(),
                    bytes,
                    lane.stream.cu_stream(),
                )
            }
            .result()
            .map_err(driver_err("cuMemcpyPeerAsync"))?;
        }
        Ok(dst)
    }
}
