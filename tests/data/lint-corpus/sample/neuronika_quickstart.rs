//! True finding: a training loop with a library whose `backward` adds into the leaves'
//! gradients and whose `step` does not clear them, and no `zero_grad` anywhere.

use neuronika::{nn::loss, optim};

pub fn train(model: &Net, data: &Dataset) {
    let optimizer = optim::SGD::new(model.parameters(), 0.01, optim::L2::new(0.0));
    for epoch in 0..5 {
        let mut total_loss: f32 = 0.0;
        for (input, target) in data.batches(2) {
            let result = model.forward(neuronika::from_ndarray(input));
            let loss = loss::mse_loss(result, neuronika::from_ndarray(target), loss::Reduction::Mean);
            loss.forward();
            total_loss += loss.data()[()];
            loss.backward(1.0);
            optimizer.step();
        }
        println!("epoch {epoch}: {total_loss}");
    }
}
