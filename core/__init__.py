"""What every mini-n8n process shares. Imports none of the other packages."""
