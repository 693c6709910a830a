"""What the app serves, without gradio: recipes, the model cache, runs, jobs, files, exports and replay."""
