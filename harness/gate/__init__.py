"""Judging results against what they were before: baselines (``baseline``), the observation of results
directories (``observe``), dump structure (``structure``) and the regression gate (``verdicts``)."""
