use gpuscope::ScopeValue;

#[derive(ScopeValue)]
union Bits {
    f: f32,
    u: u32,
}

fn main() {
    let b = Bits { u: 1 };
    let _ = unsafe { b.f };
}
