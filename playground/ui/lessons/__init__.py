"""The Lessons tab: ask-then-reveal lessons on the live model, and the classroom room that follows a teacher."""
