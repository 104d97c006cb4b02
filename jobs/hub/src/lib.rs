//! Hugging Face Hub protocol: client and embedded server (see docs/hub.md).
