//! gpuscope's lint rules (skeleton; being written).
