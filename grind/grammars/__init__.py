"""Grammar families and their construction: the Grammar class, fully connected CNF, the DMV (tags or words)."""
