"""Learned drafters on top of the frozen model: TokenSwift's linear multi-token heads and a
stronger recurrent draft head (EAGLE-style), their training, files and candidate source."""
