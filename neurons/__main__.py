from neurons.cli import app

app()
