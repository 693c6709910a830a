"""The Inside tab: the logit lens, attributions, interventions and activation patching of the last run."""
