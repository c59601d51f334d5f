//! Where a value lives, as far as the function shows: on the CPU ([`Value::on_cpu`]) or
//! not known.
//!
//! The CPU device is named (`Device::Cpu` of candle and tch, tch's `FLOAT_CPU`, a local
//! bound to one, a function of the file returning one); a constructor or a call given it
//! makes its result there (`Tensor::from_vec(v, n, &Device::Cpu)`,
//! `safetensors::load(path, &device)`); an op on tensors there stays there, since candle
//! and tch do not mix devices in an op (`e.get(i)?`, `(&a * &b)?.sum_all()?`); a move
//! (`to_device`, `to`) goes where its argument says. Anything else is not known to be on
//! the CPU, and the rules treat it as they did before.

use super::types::Kind;
use super::value::Value;

/// Methods that move a tensor to the device their argument names (candle's and tch's
/// `to_device`, tch's `to`).
pub(crate) const MOVES: &[&str] = &["to_device", "to"];

/// The CPU device itself (a host value).
pub(super) const CPU_DEVICE: Value = Value {
    on_cpu: true,
    ..Value::HOST
};

/// Whether `v` may take part in an op on the CPU: it is there, or it is not a tensor known
/// to be elsewhere (a number, a shape, a dtype, a value of unknown kind).
fn may_join(v: &Value) -> bool {
    v.on_cpu || v.kind != Kind::Device
}

/// Whether a value made of parts (a constructor's or a call's arguments, a tuple's or an
/// array's elements) is on the CPU, gathered a part at a time ([`MadeOf::add`]): one part
/// is the CPU device, or one is a value there and every other part may join it.
pub(super) struct MadeOf {
    device: bool,
    there: bool,
    all_join: bool,
}

impl MadeOf {
    /// No part yet.
    pub(super) const NOTHING: MadeOf = MadeOf {
        device: false,
        there: false,
        all_join: true,
    };

    pub(super) fn add(&mut self, part: &Value) {
        self.device |= part.on_cpu && part.kind == Kind::Host;
        self.there |= part.on_cpu;
        self.all_join &= may_join(part);
    }

    pub(super) fn on_cpu(&self) -> bool {
        self.device || (self.there && self.all_join)
    }
}

/// Whether `receiver.method(args)` is on the CPU (`args`: the arguments' joined value, as
/// [`MadeOf`] sets it): a move there, or an op on a receiver there whose arguments
/// may join it.
pub(super) fn method_on_cpu(method: &str, receiver: &Value, args: &Value) -> bool {
    if MOVES.contains(&method) {
        return args.on_cpu && args.kind == Kind::Host;
    }
    receiver.on_cpu && (args.on_cpu || args.kind != Kind::Device)
}

/// Whether `l op r` (arithmetic) is on the CPU: a side is there and the other may join it.
pub(super) fn binary_on_cpu(l: &Value, r: &Value) -> bool {
    (l.on_cpu || r.on_cpu) && may_join(l) && may_join(r)
}
