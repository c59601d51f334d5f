use gpuscope::gpu_scope;

#[gpu_scope]
async fn count(items: &[u32]) -> usize {
    std::future::ready(()).await;
    items.iter().sum::<u32>()
}

fn main() {
    let _ = count(&[1, 2]);
}
