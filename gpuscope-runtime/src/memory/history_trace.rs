//! A recorded allocation history as an allocation trace ([`history_trace`]): what a
//! program asked its allocator, in the format `gpuscope replay` replays, so a workload
//! of your own can be replayed under other allocator settings or beside PyTorch's
//! allocator (`bench/compare_torch.sh`).

use std::collections::HashMap;

use crate::record::{History, HistoryAction};
use crate::trace_format::{Trace, TraceOp};

/// The allocations and frees of `history` as a [`Trace`]: each allocation gets the next
/// id, each free names the allocation at its address, and streams are numbered 0, 1, …
/// in order of first use (the trace format's stream numbers are labels).
///
/// Blocks allocated before the recording started are not in the trace, and neither are
/// their frees; start [`record_history`](super::record_history) before the code to
/// replay (with `max_entries` large enough that nothing is dropped:
/// [`History::dropped`] is 0). Segment events are left out: they are what an allocator
/// did, and a replay makes its own.
///
/// ```
/// use gpuscope_runtime::{memory, Device, Tensor};
/// let dev = Device::host().unwrap();
/// memory::record_history(&dev, 10_000);
/// let a = Tensor::zeros(&[1024], &dev).unwrap();
/// let b = Tensor::zeros(&[64, 64], &dev).unwrap();
/// drop(a);
/// let trace = memory::history_trace(&memory::history(&dev).unwrap());
/// assert_eq!(trace.to_csv(), "op,id,size,stream\na,0,4096,0\na,1,16384,0\nf,0,0,0\n");
/// # drop(b);
/// ```
pub fn history_trace(history: &History) -> Trace {
    let mut streams: HashMap<u64, u32> = HashMap::new();
    let mut live: HashMap<u64, u64> = HashMap::new();
    let mut ops = Vec::with_capacity(history.events.len());
    let mut next_id = 0u64;
    for event in &history.events {
        match event.action {
            HistoryAction::Alloc => {
                let n = streams.len() as u32;
                let stream = *streams.entry(event.stream).or_insert(n);
                let id = next_id;
                next_id += 1;
                // An address given out again without a free in between (a free dropped
                // from a full history): the earlier block is gone; keep the trace valid.
                if let Some(old) = live.insert(event.addr, id) {
                    ops.push(TraceOp::Free { id: old });
                }
                ops.push(TraceOp::Alloc {
                    id,
                    size: event.size as usize,
                    stream,
                });
            }
            HistoryAction::Free => {
                if let Some(id) = live.remove(&event.addr) {
                    ops.push(TraceOp::Free { id });
                }
            }
            HistoryAction::SegmentAlloc | HistoryAction::SegmentFree => {}
        }
    }
    Trace::from_ops(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::HistoryEvent;

    fn event(action: HistoryAction, addr: u64, size: u64, stream: u64) -> HistoryEvent {
        HistoryEvent {
            time_ns: 0,
            action,
            addr,
            size,
            stream,
            site: None,
        }
    }

    #[test]
    fn frees_of_blocks_from_before_the_recording_are_left_out() {
        let history = History {
            events: vec![
                event(HistoryAction::Free, 0x100, 64, 7),
                event(HistoryAction::SegmentAlloc, 0, 1 << 21, 7),
                event(HistoryAction::Alloc, 0x200, 512, 7),
                event(HistoryAction::Alloc, 0x400, 256, 9),
                event(HistoryAction::Free, 0x200, 512, 7),
                event(HistoryAction::Alloc, 0x200, 128, 7),
            ],
            ..History::default()
        };
        let trace = history_trace(&history);
        assert_eq!(
            trace.to_csv(),
            "op,id,size,stream\na,0,512,0\na,1,256,1\nf,0,0,0\na,2,128,0\n"
        );
        // What it writes parses back as the same trace.
        assert_eq!(
            Trace::parse_str(&trace.to_csv(), "t").unwrap().ops(),
            trace.ops()
        );
    }

    #[test]
    fn an_address_reused_without_its_free_frees_the_older_block_first() {
        let history = History {
            events: vec![
                event(HistoryAction::Alloc, 0x200, 512, 1),
                event(HistoryAction::Alloc, 0x200, 512, 1),
            ],
            ..History::default()
        };
        let csv = history_trace(&history).to_csv();
        assert_eq!(csv, "op,id,size,stream\na,0,512,0\nf,0,0,0\na,1,512,0\n");
        Trace::parse_str(&csv, "t").unwrap();
    }
}
