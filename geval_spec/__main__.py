from geval_spec.cli.main import main

main()
