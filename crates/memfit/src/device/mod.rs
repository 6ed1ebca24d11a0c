//! Where a job's kernels run: the CPU (always), or a CUDA device when memfit
//! is built with the `cuda` cargo feature (off by default: the default build
//! needs no CUDA, and loads none).
//!
//! A device is named as `cpu`, `cuda` or `cuda:N` ([`Device`]'s `FromStr`)
//! and opened with [`open`], which says clearly why it cannot be used: a
//! build without the feature, no driver library, no device at that ordinal,
//! or a driver error. It never panics (the driver library is probed before
//! a context is created; `cudarc` panics otherwise). [`plan`] holds the
//! device planner: the buffers a job keeps in device memory, its row tiles
//! and its refusals, within a device memory limit as the host planner works
//! within the host limit.

pub mod plan;

#[cfg(feature = "cuda")]
pub mod cuda;

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Remedy, Result};

/// Where kernels run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Device {
    /// The host's cores (the default).
    #[default]
    Cpu,
    /// The CUDA device of this ordinal.
    Cuda(usize),
}

impl Device {
    /// Whether kernels run on the host.
    pub fn is_cpu(self) -> bool {
        self == Device::Cpu
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl FromStr for Device {
    type Err = Error;

    /// `cpu`, `cuda` (ordinal 0) or `cuda:N` (N decimal digits), in any
    /// case.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`device`) for anything else; the name
    /// is quoted in it, cut ([`crate::units::quoted`]).
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.trim().to_ascii_lowercase();
        let bad = || {
            let got = crate::units::quoted(s);
            Error::param("device", format!("must be 'cpu', 'cuda' or 'cuda:N' (N a device ordinal), got {got}"))
        };
        let ordinal = |n: &str| n.bytes().all(|b| b.is_ascii_digit()).then(|| n.parse().ok()).flatten();
        match lower.as_str() {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda(0)),
            other => other.strip_prefix("cuda:").and_then(ordinal).map(Device::Cuda).ok_or_else(bad),
        }
    }
}

/// What [`open`] found: the device's name and its memory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceInfo {
    /// The device opened.
    pub device: Device,
    /// Its name as the driver reports it (`"cpu"` for the host).
    pub name: String,
    /// Its total memory in bytes (0 for the host, whose memory the host
    /// planner owns).
    pub total_bytes: u64,
}

/// Opens `device`: the CPU always opens; a CUDA device needs a build with
/// the `cuda` feature, a driver library and a device at its ordinal.
///
/// # Errors
/// [`Error::DeviceUnavailable`] saying which of those is missing, with
/// the remedy of running on the CPU.
pub fn open(device: Device) -> Result<DeviceInfo> {
    match device {
        Device::Cpu => Ok(DeviceInfo { device, name: "cpu".into(), total_bytes: 0 }),
        Device::Cuda(ordinal) => open_cuda(device, ordinal),
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(device: Device, ordinal: usize) -> Result<DeviceInfo> {
    cuda::probe(ordinal)
        .map(|(name, total_bytes)| DeviceInfo { device, name, total_bytes })
        .map_err(|reason| unavailable(device, reason))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(device: Device, _ordinal: usize) -> Result<DeviceInfo> {
    Err(built_without_cuda(device))
}

#[cfg(not(feature = "cuda"))]
fn built_without_cuda(device: Device) -> Error {
    unavailable(device, "this memfit was built without CUDA support (the `cuda` cargo feature)".into())
}

/// The backend a job planned for `device` (its device plan's `schedule`)
/// runs on: the CPU, or with the `cuda` feature the CUDA device, streaming
/// tiles of the plan's rows through its kernels (k-means assignments, a
/// mixture's log-densities).
///
/// # Errors
/// [`Error::DeviceUnavailable`] for a CUDA device in a build without the
/// `cuda` feature.
pub fn backend(device: Device, schedule: &plan::DeviceSchedule) -> Result<crate::exec::Backend> {
    match device {
        Device::Cpu => Ok(crate::exec::Backend::Cpu),
        #[cfg(feature = "cuda")]
        Device::Cuda(ordinal) => Ok(crate::exec::Backend::Cuda { ordinal, tile_rows: schedule.tile_rows }),
        #[cfg(not(feature = "cuda"))]
        Device::Cuda(_) => {
            let _ = schedule;
            Err(built_without_cuda(device))
        }
    }
}

/// The refusal of a job planned for `device` that has no execution path
/// there yet: `what` names it (`"Gaussian mixtures held in component
/// groups"`).
pub fn execution_unavailable(device: Device, what: &str) -> Error {
    unavailable(device, format!("memfit does not run {what} on CUDA devices yet"))
}

/// The error for a device that cannot be used, and why.
pub(crate) fn unavailable(device: Device, reason: String) -> Error {
    Error::DeviceUnavailable { device: device.to_string(), reason, remedies: vec![Remedy::RunOnCpu] }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_and_print() {
        for (s, d) in [
            ("cpu", Device::Cpu),
            ("CUDA", Device::Cuda(0)),
            ("cuda:3", Device::Cuda(3)),
            (" cuda:0 ", Device::Cuda(0)),
        ] {
            assert_eq!(s.parse::<Device>().unwrap(), d);
        }
        assert_eq!(Device::Cuda(2).to_string(), "cuda:2");
        for bad in ["gpu", "cuda:", "cuda:-1", "cuda:+1", "cuda: 1", "cuda:x", "cuda:99999999999999999999999", ""] {
            let e = bad.parse::<Device>().unwrap_err().to_string();
            assert!(e.starts_with("invalid device: must be 'cpu', 'cuda' or 'cuda:N'"), "{e}");
        }
        // A long name is quoted cut.
        let e = "x".repeat(10_000).parse::<Device>().unwrap_err().to_string();
        assert!(e.ends_with(&format!("got \"{}\"…", "x".repeat(crate::units::SHOWN_CHARS))), "{e}");
    }

    #[test]
    fn a_missing_cuda_device_is_an_error_not_a_crash() {
        assert_eq!(open(Device::Cpu).unwrap().name, "cpu");
        // This machine has no CUDA driver (CI's has none either): opening
        // a CUDA device says why and suggests the CPU.
        if cfg!(feature = "cuda") && std::env::var_os("MEMFIT_HAS_CUDA_DRIVER").is_some() {
            return;
        }
        let e = open(Device::Cuda(0)).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, Error::DeviceUnavailable { .. }), "{text}");
        assert!(text.starts_with("cuda:0: cannot be used: "), "{text}");
        let why = if cfg!(feature = "cuda") { "no CUDA driver library" } else { "built without CUDA support" };
        assert!(text.contains(why), "{text}");
        assert!(text.ends_with("hint: run on the CPU"), "{text}");
    }
}
