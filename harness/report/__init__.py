"""Reports people read: the markdown summary, a PNG per scenario, verl's doc tables, merged JUnit, and what the
judge's verdicts read as (``verdicts``). Nothing is imported here, so a verdict's words do not pull matplotlib in."""
