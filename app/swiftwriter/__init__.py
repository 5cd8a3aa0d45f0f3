"""SwiftWriter: a writing assistant whose long generations are accelerated losslessly (TokenSwift)."""

__version__ = "0.1.0"
