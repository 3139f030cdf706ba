from corl.studies.real.study import main

main()
