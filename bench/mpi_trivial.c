/* mpi_trivial: memnesia's "Trivial" program: MPI_Init, MPI_Barrier, MPI_Finalize. */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
