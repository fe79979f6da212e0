"""The evaluation stage (rules/evaluate.smk): what a run's scores are worth, read from its score
files, selections and labels, written as tables. The mining benchmark (:mod:`.bucc`), filtering quality
on labelled pairs (:mod:`.filtereval`), a selection's composition (:mod:`.composition`), the clean share
estimated from the noise baseline (:mod:`.cleanshare`, :mod:`.cleanreport`), the shortcut check of
fitted scorers (:mod:`.shortcut`), translate-then-vote's rules (:mod:`.votereport`) and the labelled
audit of how many pairs to keep (:mod:`.audit`, how many pairs to keep with an interval; its sample
files, labelling page, report and simulation). Imports the scoring stage and below, never above."""
