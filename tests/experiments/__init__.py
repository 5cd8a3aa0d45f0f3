"""Tests of the experiments kept outside the shipped package (experiments/)."""
