"""Running a campaign's work on a Ray cluster (`mailroom launch --executor ray`)."""
