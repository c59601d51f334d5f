// A new user's ways of keeping a tensor made in a `#[gpu_scope]` function: each stores it
// in memory the caller owns, where the scope reports it as leaked (scope_escape).
use gpuscope::{Device, Tensor, TensorError, gpu_scope};
use std::collections::HashMap;

pub struct Cache {
    map: HashMap<String, Tensor>,
    last: Option<Tensor>,
    all: Vec<Tensor>,
}

impl Cache {
    #[gpu_scope]
    pub fn fill(
        &mut self,
        x: &Tensor,
        out: &mut Option<Tensor>,
        slots: &mut [Tensor],
    ) -> Result<(), TensorError> {
        let y = x.relu()?;
        self.map.insert("a".into(), y.clone());
        self.all.extend(vec![x.add(x)?]);
        *out = Some(x.matmul(x)?);
        slots[0] = x.relu()?;
        self.last.replace(x.sum()?);
        let z = x.relu()?;
        self.all.push(z);
        let mut v = vec![Tensor::zeros(&[2], &x.device())?];
        self.all.append(&mut v);
        if let Some(t) = out.as_mut() {
            *t = x.relu()?;
        }
        Ok(())
    }
}

#[gpu_scope]
pub fn into_map(
    x: &Tensor,
    m: &mut HashMap<u32, Tensor>,
    keep: &mut Vec<Tensor>,
    dev: &Device,
) -> Result<(), TensorError> {
    m.entry(1).or_insert(Tensor::ones(&[1], dev)?);
    m.entry(2).or_insert_with(|| x.relu().unwrap());
    let double = |t: &Tensor| t.add(t);
    keep.push(double(x)?);
    // Not stored: a local map, and a value handed to `keep` on purpose.
    let mut local = HashMap::new();
    local.insert(3, x.relu()?);
    let kept = x.relu()?;
    gpuscope::keep(&kept);
    keep.push(kept);
    Ok(())
}
