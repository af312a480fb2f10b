// Stand-in for @deepseek-ai/dsh-brand (not published at 0.1.1-rc.2).
// The real package contributes only compile-time brand types; the published
// JavaScript of dsh-session and dsh-llm imports no runtime value from it.
export {}
