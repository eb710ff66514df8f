mod anthropic;
mod anthropic_stream;
mod config_clients;
pub mod mock;
mod openai;
mod openai_errors;
mod openai_stream;
