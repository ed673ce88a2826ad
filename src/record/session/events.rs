// SPDX-License-Identifier: Apache-2.0
//! The ring buffers' events: copied out as they are drained, then handed to their handlers; the wait between
//! polls, cut short when the BPF side wakes tlsprof for a Go function's new caller or a process.

use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use libbpf_rs::{RingBuffer, RingBufferBuilder};

use super::Session;
use crate::record::kernel::bpf::types::{go_return_event, tlsprof_event_kind};
use crate::record::kernel::programs::Programs;

/// How often the ring buffers are drained (they hold several seconds of events at the highest rates).
const POLL: Duration = Duration::from_millis(100);
/// How often callers are taken in while Go functions learn them: their return instructions, single-stepped,
/// stay probed until they settle.
const LEARNING_POLL: Duration = Duration::from_millis(10);

/// The ring buffers' events, copied out by their callbacks and handed to their handlers after each drain.
pub(super) struct Events {
    ring: RingBuffer<'static>,
    /// go_callers and processes: the rings waited on, whose records wake tlsprof.
    woken_ring: RingBuffer<'static>,
    callers: Receiver<Vec<u8>>,
    pub(super) processes: Receiver<Vec<u8>>,
    handshakes: Receiver<Vec<u8>>,
    stacks: Receiver<Vec<u8>>,
    trap_samples: Receiver<Vec<u8>>,
}

impl Events {
    pub(super) fn new(programs: &Programs) -> Result<Events> {
        let queue = |tx: Sender<Vec<u8>>| {
            move |data: &[u8]| {
                // The receiver lives as long as the ring buffer: a send cannot fail while it is drained.
                let _ = tx.send(data.to_vec());
                0
            }
        };
        let (handshakes_tx, handshakes) = mpsc::channel();
        let (stacks_tx, stacks) = mpsc::channel();
        let (traps_tx, trap_samples) = mpsc::channel();
        let (callers_tx, callers) = mpsc::channel();
        let (processes_tx, processes) = mpsc::channel();
        let mut woken_ring = RingBufferBuilder::new();
        woken_ring
            .add(&programs.skel.maps.go_callers, queue(callers_tx))?
            .add(&programs.skel.maps.processes, queue(processes_tx))?;
        let mut rb = RingBufferBuilder::new();
        rb.add(&programs.skel.maps.handshakes, queue(handshakes_tx))?
            .add(&programs.skel.maps.stacks, queue(stacks_tx))?
            .add(&programs.skel.maps.trap_samples, queue(traps_tx))?;
        Ok(Events {
            ring: rb.build()?,
            woken_ring: woken_ring.build()?,
            callers,
            processes,
            handshakes,
            stacks,
            trap_samples,
        })
    }
}

impl Session<'_, '_> {
    /// Waits out a poll. The BPF side wakes us only when a Go function reports a new caller (go_callers) or a
    /// process joins, runs a new program or maps code (processes; the other rings are drained on our own clock):
    /// that caller, that process, is probed at once, and while any function is learning its callers are taken in
    /// every LEARNING_POLL. A signal ends the wait early.
    pub(super) fn wait_poll(&mut self) -> Result<()> {
        let until = Instant::now() + POLL;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            // Only learn_callers changes it, and it reads /proc for the learning processes.
            let learning = self.targets.learning();
            let wait = if learning { left.min(LEARNING_POLL) } else { left };
            match self.events.woken_ring.poll_raw(wait) {
                n if n == -libc::EINTR => return Ok(()),
                n if n < 0 => {
                    return Err(std::io::Error::from_raw_os_error(-n))
                        .context("wait for Go functions' callers and new processes")
                }
                _ => {}
            }
            self.drain_callers()?;
            self.take_in_processes();
            if learning || !self.callers.is_empty() {
                self.learn_callers()?;
            }
        }
    }

    /// Takes the Go functions' newly reported callers in (and queues the processes that joined).
    fn drain_callers(&mut self) -> Result<()> {
        self.events.woken_ring.consume().context("drain the ring buffers")?;
        for data in self.events.callers.try_iter() {
            let mut caller = go_return_event::default();
            if plain::copy_from_bytes(&mut caller, &data).is_ok()
                && caller.kind == tlsprof_event_kind::EVENT_GO_RETURN.0
            {
                self.callers
                    .push((caller.tgid, caller.func, [caller.addr, caller.outer]));
            }
        }
        Ok(())
    }

    /// Probes where the Go functions' newly reported callers resume, and settles those that learned theirs.
    pub(super) fn learn_callers(&mut self) -> Result<()> {
        self.targets
            .learn_callers(&self.programs.skel, &std::mem::take(&mut self.callers));
        self.targets.settle(&self.programs.skel)
    }

    /// Hands each ring buffer's events to its handler.
    pub(super) fn drain(&mut self) -> Result<()> {
        self.events.ring.consume().context("drain the ring buffers")?;
        self.drain_callers()?;
        for data in self.events.handshakes.try_iter() {
            self.handshakes.add(&data);
        }
        for data in self.events.stacks.try_iter() {
            self.samples.add(&data);
        }
        for data in self.events.trap_samples.try_iter() {
            self.samples.add_trap_sample(&data);
        }
        Ok(())
    }
}
