//! Property tests: arbitrary input never panics the parser or the linter.
