"""The board: a live, read-only web page of every claim, served on the loopback interface
(docs/board.md)."""
