"""Evaluations that read a run's outputs and labels and write tables: the labelled audit of a
scorer's ranking (:mod:`marginmine.evaluate.audit`, how many pairs to keep with an interval), its
sample files and labelling page, and its simulation on fully labelled sets."""
