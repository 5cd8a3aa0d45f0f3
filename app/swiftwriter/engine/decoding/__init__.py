"""The decoding loop: a request becomes a run whose steps propose drafts (sources, the learned
drafter), build and price a token trie, verify it in one model pass (through the passes'
door, `swiftwriter.engine.passes`), accept by the target's own draws, and commit."""
