// SPDX-License-Identifier: Apache-2.0
//! The probe windows of the --max-overhead duty cycle, by the epoch rule: a window starts once every probe is
//! attached and ends before any is detached.

use anyhow::{Context, Result};

use super::{detach, TargetSet};
use crate::record::kernel::bpf::TlsprofSkel;
use crate::record::status;

impl TargetSet {
    /// A pause of the --max-overhead duty cycle begins: the window ends (next_epoch), so that the stage
    /// probes' hits from now on are ignored, also while they are being detached (detach_all).
    pub fn end_window(&mut self, skel: &mut TlsprofSkel) -> Result<()> {
        next_epoch(skel)?;
        self.paused = true;
        Ok(())
    }

    /// Detaches the stage probes (not the sampler).
    pub fn detach_all(&mut self) {
        let mut links = std::mem::take(&mut self.links);
        links.extend(self.exit_links.drain().flat_map(|(_, ls)| ls).map(|(_, l)| (0, l)));
        detach(links);
    }

    /// Attaches the stage probes again in every process still running; the window starts once all are
    /// attached (next_epoch), so every function's hits count from the same moment and state left by the
    /// last window is dropped.
    pub fn resume(&mut self, skel: &mut TlsprofSkel) -> Result<()> {
        self.specs.retain(|s| s.scope.alive());
        let mut failed = Vec::new();
        let specs = std::mem::take(&mut self.specs);
        for (i, spec) in specs.iter().enumerate() {
            match self.attach_spec(skel, spec) {
                Ok(()) => {}
                // It exited since the check above.
                Err(_) if !spec.scope.alive() => failed.push(i),
                // It ran exec since it was last looked at: the file is no longer mapped there. The next look
                // (`changes`) probes what it runs now.
                Err(e) => {
                    status::warn_once(
                        &format!("reattach {:?} {}", spec.scope.pid(), spec.path),
                        &format!("{e:#}: no longer probed there"),
                    );
                    failed.push(i);
                }
            }
        }
        self.specs = specs;
        for i in failed.into_iter().rev() {
            let gone = self.specs.swap_remove(i);
            detach(
                self.exit_links
                    .remove(&gone.id)
                    .into_iter()
                    .flatten()
                    .map(|(_, l)| (gone.scope.pid().unwrap_or(0), l))
                    .collect(),
            );
        }
        self.paused = false;
        next_epoch(skel)
    }
}

/// Before the recording's first probes attach: their hits are ignored until `open_window`.
pub fn hold_window(skel: &mut TlsprofSkel) -> Result<()> {
    next_epoch(skel)
}

/// Opens the recording's first window, once all its probes are attached.
pub fn open_window(skel: &mut TlsprofSkel) -> Result<()> {
    next_epoch(skel)
}

/// Flips the BPF side's probe_epoch: even while the stage probes are live, odd while paused. The programs
/// drop state from an earlier epoch and ignore hits while it is odd.
fn next_epoch(skel: &mut TlsprofSkel) -> Result<()> {
    let bss = skel.maps.bss_data.as_deref_mut().context("BPF .bss")?;
    // SAFETY: an aligned u32 in the BPF map's shared mapping; volatile, as the BPF programs read it meanwhile.
    unsafe { std::ptr::write_volatile(&mut bss.probe_epoch, bss.probe_epoch.wrapping_add(1)) };
    Ok(())
}
