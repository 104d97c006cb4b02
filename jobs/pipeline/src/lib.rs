//! The Minirun stages as library code.
