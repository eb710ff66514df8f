mod anthropic;
mod anthropic_stream;
pub mod mock;
mod openai;
mod openai_errors;
mod openai_stream;
