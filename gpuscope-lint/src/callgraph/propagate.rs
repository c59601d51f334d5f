//! Loops added up along calls: each function's [`CalledIn`] from the resolved calls
//! ([`Edge`]s), one more call of the chains each round, for at most [`MAX_CHAIN`] rounds or
//! until nothing changes (so cycles and recursion end).

use super::CalledIn;

/// The longest chain of calls through which loops add up.
pub(crate) const MAX_CHAIN: usize = 4;

/// Loops counted at most (two make code hot).
const MAX_LOOPS: usize = 2;

/// A call resolved to a function: indices into the functions `propagate` is given.
pub(super) struct Edge<'a> {
    pub(super) caller: usize,
    pub(super) callee: usize,
    /// Loops around the call that repeat it.
    pub(super) around: usize,
    pub(super) call: &'a str,
    pub(super) line: usize,
    /// The file of the call, where it is not the callee's.
    pub(super) file: Option<&'a str>,
}

/// The call repeating a function most, so far.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Best {
    pub(super) loops: usize,
    pub(super) caller_loops: usize,
    /// The index of the call in the edges.
    pub(super) edge: usize,
}

/// The call that repeats each of `n` functions most, with the loops it adds (none where no
/// loop repeats the function).
pub(super) fn propagate(n: usize, edges: &[Edge<'_>]) -> Vec<Option<Best>> {
    let mut best: Vec<Option<Best>> = vec![None; n];
    for _ in 0..MAX_CHAIN {
        let before = best.clone();
        for (i, edge) in edges.iter().enumerate() {
            let outer = before[edge.caller].map_or(0, |c| c.loops);
            let loops = (edge.around + outer).min(MAX_LOOPS);
            if loops == 0 || best[edge.callee].is_some_and(|c| c.loops >= loops) {
                continue;
            }
            best[edge.callee] = Some(Best {
                loops,
                caller_loops: outer,
                edge: i,
            });
        }
        if before == best {
            break;
        }
    }
    best
}

/// The [`CalledIn`] of `best`, the functions named `names`.
pub(super) fn called_in(best: &Best, edges: &[Edge<'_>], names: &[&str]) -> CalledIn {
    let edge = &edges[best.edge];
    CalledIn {
        loops: best.loops,
        around_call: edge.around,
        caller_loops: best.caller_loops,
        call: edge.call.to_owned(),
        caller: names[edge.caller].to_owned(),
        line: edge.line,
        file: edge.file.map(str::to_owned),
        by: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(caller: usize, callee: usize, around: usize) -> Edge<'static> {
        Edge {
            caller,
            callee,
            around,
            call: "f(..)",
            line: 1,
            file: None,
        }
    }

    #[test]
    fn loops_add_up_along_four_calls_and_cycles_end() {
        // 0 -(2 loops)-> 1 -> 2 -> 3 -> 4 -> 5, and 5 -> 1 back.
        let edges = [
            edge(0, 1, 2),
            edge(1, 2, 0),
            edge(2, 3, 0),
            edge(3, 4, 0),
            edge(4, 5, 0),
            edge(5, 1, 0),
        ];
        let best = propagate(6, &edges);
        let loops: Vec<usize> = best.iter().map(|b| b.map_or(0, |b| b.loops)).collect();
        // One more call each round, four rounds: `5` is five calls from the loops.
        assert_eq!(loops, [0, 2, 2, 2, 2, 0]);
        let ring = [edge(0, 1, 1), edge(1, 0, 1)];
        let best = propagate(2, &ring);
        assert_eq!(best[0].map(|b| b.loops), Some(2));
    }
}
