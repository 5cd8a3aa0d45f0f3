"""The writing layer: everything one take of text needs between the window (or the command
line) and the engine. A take and its request (take.py), the request resolved into a session's
plan (plan.py), the session that runs it on a prompt or a document (session.py), the prompt's story context (context.py), where a take ends
(endings.py), the guards against chatter and breakdown it is written under (guards.py), the
project's drafting history and the open project's histories by tokenizer (history.py), what a
take needs of a loaded model (loaded.py), the plain-decoding baseline it is measured against
(baseline.py), the synopsis (synopsis.py), the rolling summary (rolling.py) and the selection
tools' alternatives (alternatives.py).

It stands above the engine and the store and below the window: it imports both, and neither
imports it; nothing here imports Qt or the window. Import the modules themselves: this package
loads nothing (torch arrives with the session, not with `swiftwriter.writing`)."""
