"""Retention (``cleanup.policy`` delete) as a broker decides and applies it: the policy's rules, plans
from a segment catalog, deletion on disk, and one partition's run."""
